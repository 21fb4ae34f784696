// Typed options: how the core and plugins declare their TOML keys (name, type, default, range,
// doc) and read the validated values. The config loader checks every key of a table against its
// OptionSpec list before any rank starts, so a plugin reading its Options never sees a wrong
// type or an unknown key: an undeclared key is a ConfigError with file:line:column and a
// did-you-mean ("unknown key 'bucket_sz' in [plugin.shard_bucket] (did you mean 'bucket_mb'?)").
// TOML types map to ValueType: boolean -> kBool, integer -> kInt, float -> kDouble (an integer
// is accepted and widened), string -> kString, an array of numbers -> kDoubleList, an array of
// strings -> kStringList (an empty array fits either list type).
// Thread safety: the functions are pure; Options is immutable after construction, so share it
// freely across threads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "zt/api.h"

namespace zt {

enum class ValueType { kBool, kInt, kDouble, kString, kDoubleList, kStringList };
// "boolean", "integer", ... (the words used in messages and `trainer plugins describe`).
ZT_API const char* value_type_name(ValueType type);

using Value =
    std::variant<bool, int64_t, double, std::string, std::vector<double>, std::vector<std::string>>;
ZT_API ValueType value_type(const Value& value);
// The TOML spelling of a value: true, 3, 0.5, "text", [1.0, 2.0], ["a"]. Never throws.
ZT_API std::string value_to_toml(const Value& value);

// Where a value came from, for error messages: "configs/x.toml:12:3" or "--set zero.stage=2".
struct SourceLocation {
  std::string file;  // config path, or "--set" / "default"
  int line = 0;      // 1-based; 0 when not from a file
  int column = 0;
  ZT_API std::string str() const;
  // Given on the command line (--set section.key=value), not in a file.
  bool from_override() const { return file.rfind("--set", 0) == 0; }
};

// One declared option. Numbers may carry a range; strings may carry a list of choices.
// `trainer plugins describe <id>` prints every field; each plugin's README lists the same names
// (a test keeps the two equal).
struct OptionSpec {
  std::string name;  // the TOML key: snake_case, unique in its table
  ValueType type = ValueType::kString;
  Value default_value;               // of `type`; used when the key is absent
  std::string doc;                   // one line: what it does and what it trades
  std::optional<double> min;         // inclusive, numbers only
  std::optional<double> max;         // inclusive, numbers only
  std::vector<std::string> choices;  // allowed strings; empty means any
};

// Spec builders, so declarations read as one line each. Never throw.
ZT_API OptionSpec opt_bool(std::string name, bool def, std::string doc);
ZT_API OptionSpec opt_int(std::string name, int64_t def, std::string doc,
                          std::optional<double> min = std::nullopt,
                          std::optional<double> max = std::nullopt);
ZT_API OptionSpec opt_double(std::string name, double def, std::string doc,
                             std::optional<double> min = std::nullopt,
                             std::optional<double> max = std::nullopt);
ZT_API OptionSpec opt_string(std::string name, std::string def, std::string doc,
                             std::vector<std::string> choices = {});
ZT_API OptionSpec opt_double_list(std::string name, std::vector<double> def, std::string doc);
ZT_API OptionSpec opt_string_list(std::string name, std::vector<std::string> def, std::string doc);

// Checks one value against its spec (type with int->double widening, range, choices).
//   spec:  in, the declaration.
//   value: in, what the user wrote.
//   table: in, "zero" or "plugin.<id>", for the message.
//   where: in, where the value was written.
// Returns the value converted to the spec's type. Throws ConfigError naming where, the key as
// table.name, the value, what was expected and the spec's doc.
ZT_API Value check_option(const OptionSpec& spec, const Value& value, const std::string& table,
                          const SourceLocation& where);

// The validated values of one table ("zero", "plugin.comm_ucx") with defaults filled in.
// The config loader builds these; plugins receive them in create(...) and read them with get_*.
class ZT_API Options {
 public:
  Options() = default;
  //   table:  in, the table's name.
  //   specs:  in, its declared options; every one gets a value (given or default).
  //   values: in, values already checked with check_option(); keys not in specs are ignored.
  //   where:  in, where each given value came from; a key in it counts as is_set().
  Options(std::string table, std::vector<OptionSpec> specs, std::map<std::string, Value> values,
          std::map<std::string, SourceLocation> where);

  const std::string& table() const { return table_; }
  const std::vector<OptionSpec>& specs() const { return specs_; }

  // The value of a declared key, as the declared type. Throws InternalError (a bug in the
  // reader, not a user error) when `name` is not declared or is read as another type.
  bool get_bool(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const std::vector<double>& get_double_list(const std::string& name) const;
  const std::vector<std::string>& get_string_list(const std::string& name) const;
  // Any declared key's value; throws InternalError when `name` is not declared.
  const Value& get(const std::string& name) const;
  // Was the key written by the user (file or --set), as opposed to defaulted?
  bool is_set(const std::string& name) const;
  // Where a key was set, for messages; "default" when it was not.
  SourceLocation where(const std::string& name) const;

 private:
  const Value& lookup(const std::string& name, ValueType type) const;

  std::string table_;
  std::vector<OptionSpec> specs_;
  std::map<std::string, Value> values_;  // every declared key, defaults included
  std::map<std::string, SourceLocation> where_;
};

}  // namespace zt
