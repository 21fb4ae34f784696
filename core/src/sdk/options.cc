#include "zt/options.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "util/article.h"
#include "zt/error.h"

namespace zt {

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::kBool: return "boolean";
    case ValueType::kInt: return "integer";
    case ValueType::kDouble: return "number";
    case ValueType::kString: return "string";
    case ValueType::kDoubleList: return "array of numbers";
    case ValueType::kStringList: return "array of strings";
  }
  return "?";
}

ValueType value_type(const Value& value) { return static_cast<ValueType>(value.index()); }

namespace {

std::string a_type(ValueType type) { return with_article(value_type_name(type)); }

// A TOML basic string: control characters escaped too, so a printed config (kept in every
// checkpoint, read back by eval, sample and live A/B arms) parses whatever a string holds.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04X", u);
      out += code;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string number_to_toml(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os.precision(17);
  os << d;
  std::string s = os.str();
  // TOML needs a '.' or exponent to read a float back as a float.
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string value_to_toml(const Value& value) {
  switch (value_type(value)) {
    case ValueType::kBool: return std::get<bool>(value) ? "true" : "false";
    case ValueType::kInt: return std::to_string(std::get<int64_t>(value));
    case ValueType::kDouble: return number_to_toml(std::get<double>(value));
    case ValueType::kString: return quote(std::get<std::string>(value));
    case ValueType::kDoubleList: {
      std::string s = "[";
      for (double d : std::get<std::vector<double>>(value))
        s += (s.size() > 1 ? ", " : "") + number_to_toml(d);
      return s + "]";
    }
    case ValueType::kStringList: {
      std::string s = "[";
      for (const auto& e : std::get<std::vector<std::string>>(value))
        s += (s.size() > 1 ? ", " : "") + quote(e);
      return s + "]";
    }
  }
  return "";
}

std::string SourceLocation::str() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

OptionSpec opt_bool(std::string name, bool def, std::string doc) {
  return {std::move(name), ValueType::kBool, def, std::move(doc), {}, {}, {}};
}
OptionSpec opt_int(std::string name, int64_t def, std::string doc, std::optional<double> min,
                   std::optional<double> max) {
  return {std::move(name), ValueType::kInt, def, std::move(doc), min, max, {}};
}
OptionSpec opt_double(std::string name, double def, std::string doc, std::optional<double> min,
                      std::optional<double> max) {
  return {std::move(name), ValueType::kDouble, def, std::move(doc), min, max, {}};
}
OptionSpec opt_string(std::string name, std::string def, std::string doc,
                      std::vector<std::string> choices) {
  return {std::move(name),   ValueType::kString, std::move(def), std::move(doc), {}, {},
          std::move(choices)};
}
OptionSpec opt_double_list(std::string name, std::vector<double> def, std::string doc) {
  return {std::move(name), ValueType::kDoubleList, std::move(def), std::move(doc), {}, {}, {}};
}
OptionSpec opt_string_list(std::string name, std::vector<std::string> def, std::string doc) {
  return {std::move(name), ValueType::kStringList, std::move(def), std::move(doc), {}, {}, {}};
}

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + quote(i);
  return s;
}

void check_range(const OptionSpec& spec, double v, const std::string& table,
                 const SourceLocation& where, const std::string& shown) {
  if (!std::isfinite(v)) {
    // No option means anything by an infinity, and one turned into an integer (a bucket's
    // bytes, a step count) is undefined behaviour.
    throw ConfigError(where.str() + ": " + table + "." + spec.name + " = " + shown +
                      " is not a finite number; give one (" + spec.doc + ")");
  }
  if ((spec.min && v < *spec.min) || (spec.max && v > *spec.max)) {
    std::ostringstream os;
    os << where.str() << ": " << table << "." << spec.name << " = " << shown
       << " is out of range; expected ";
    if (spec.min && spec.max) os << "a value from " << *spec.min << " to " << *spec.max;
    else if (spec.min) os << "a value >= " << *spec.min;
    else os << "a value <= " << *spec.max;
    os << " (" << spec.doc << ")";
    throw ConfigError(os.str());
  }
}

}  // namespace

Value check_option(const OptionSpec& spec, const Value& value, const std::string& table,
                   const SourceLocation& where) {
  ValueType got = value_type(value);
  Value v = value;
  if (spec.type == ValueType::kDouble && got == ValueType::kInt) {
    v = static_cast<double>(std::get<int64_t>(value));
  } else if (spec.type == ValueType::kDoubleList && got == ValueType::kStringList &&
             std::get<std::vector<std::string>>(value).empty()) {
    v = std::vector<double>{};  // an empty array has no element type
  } else if (spec.type == ValueType::kStringList && got == ValueType::kDoubleList &&
             std::get<std::vector<double>>(value).empty()) {
    v = std::vector<std::string>{};
  } else if (got != spec.type) {
    throw ConfigError(where.str() + ": " + table + "." + spec.name + " must be " +
                      a_type(spec.type) + ", got " + value_type_name(got) + " " +
                      value_to_toml(value) + " (" + spec.doc + "); e.g. " + spec.name + " = " +
                      value_to_toml(spec.default_value));
  }
  if (spec.type == ValueType::kInt) {
    check_range(spec, static_cast<double>(std::get<int64_t>(v)), table, where, value_to_toml(v));
  } else if (spec.type == ValueType::kDouble) {
    check_range(spec, std::get<double>(v), table, where, value_to_toml(v));
  } else if (spec.type == ValueType::kDoubleList) {
    // A list element must be a number to count with: inf and nan (TOML has them) were cast to
    // integers (a trace step, a tensor shape) with undefined results.
    for (const double x : std::get<std::vector<double>>(v)) {
      if (std::isfinite(x)) continue;
      throw ConfigError(where.str() + ": " + table + "." + spec.name + " = " + value_to_toml(v) +
                        " holds " + value_to_toml(Value(x)) + "; give finite numbers (" + spec.doc +
                        ")");
    }
  } else if (spec.type == ValueType::kString && !spec.choices.empty()) {
    const auto& s = std::get<std::string>(v);
    bool ok = false;
    for (const auto& c : spec.choices) ok = ok || c == s;
    if (!ok) {
      throw ConfigError(where.str() + ": " + table + "." + spec.name + " = " + quote(s) +
                        " is not one of " + join(spec.choices) + " (" + spec.doc + ")");
    }
  }
  return v;
}

Options::Options(std::string table, std::vector<OptionSpec> specs,
                 std::map<std::string, Value> values, std::map<std::string, SourceLocation> where)
    : table_(std::move(table)), specs_(std::move(specs)), where_(std::move(where)) {
  for (const auto& spec : specs_) {
    auto it = values.find(spec.name);
    values_[spec.name] = it != values.end() ? it->second : spec.default_value;
  }
}

const Value& Options::lookup(const std::string& name, ValueType type) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    throw InternalError("option '" + name + "' was read from [" + table_ +
                        "] but is not declared in its option specs; declare it in options()");
  }
  if (value_type(it->second) != type) {
    throw InternalError("option " + table_ + "." + name + " is " + a_type(value_type(it->second)) +
                        ", read as " + a_type(type));
  }
  return it->second;
}

bool Options::get_bool(const std::string& n) const {
  return std::get<bool>(lookup(n, ValueType::kBool));
}
int64_t Options::get_int(const std::string& n) const {
  return std::get<int64_t>(lookup(n, ValueType::kInt));
}
double Options::get_double(const std::string& n) const {
  return std::get<double>(lookup(n, ValueType::kDouble));
}
const std::string& Options::get_string(const std::string& n) const {
  return std::get<std::string>(lookup(n, ValueType::kString));
}
const std::vector<double>& Options::get_double_list(const std::string& n) const {
  return std::get<std::vector<double>>(lookup(n, ValueType::kDoubleList));
}
const std::vector<std::string>& Options::get_string_list(const std::string& n) const {
  return std::get<std::vector<std::string>>(lookup(n, ValueType::kStringList));
}
const Value& Options::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    throw InternalError("option '" + name + "' is not declared in [" + table_ + "]");
  }
  return it->second;
}
bool Options::is_set(const std::string& name) const { return where_.count(name) != 0; }
SourceLocation Options::where(const std::string& name) const {
  auto it = where_.find(name);
  return it != where_.end() ? it->second : SourceLocation{"default", 0, 0};
}

}  // namespace zt
