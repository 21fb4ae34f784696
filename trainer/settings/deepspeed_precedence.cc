#include "settings/deepspeed_precedence.h"

#include <algorithm>
#include <optional>

#include "zt/error.h"

namespace zt::trainer {
namespace {

// The validated table a setting's key lives in; null for a plugin or codec table the config
// does not have (the TOML turned the plugin or codec off).
const Options* table_of(const Config& config, const std::string& table) {
  if (table.rfind("plugin.", 0) == 0) {
    const auto& tables = config.plugin_tables();
    const auto it = std::find_if(tables.begin(), tables.end(),
                                 [&](const Options& t) { return t.table() == table; });
    return it == tables.end() ? nullptr : &*it;
  }
  if (table.rfind("codec.", 0) == 0) {
    const std::string role = table.substr(6);
    if (config.section("plugins").get_string("codec_" + role).empty()) return nullptr;
    return &config.codec_options(role);
  }
  return &config.section(table);  // the reader writes config_schema()'s sections only
}

struct Resolved {
  const Value& value;
  SourceLocation where;
  bool set;  // by the file, --set or the JSON; not, where the file set the key's other name
};

std::optional<Resolved> resolved(const Config& config, const std::string& key) {
  const size_t dot = key.rfind('.');
  const Options* table = table_of(config, key.substr(0, dot));
  const std::string name = key.substr(dot + 1);
  if (!table) return std::nullopt;
  const auto& specs = table->specs();
  if (std::none_of(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.name == name; }))
    return std::nullopt;
  return Resolved{table->get(name), table->where(name), table->is_set(name)};
}

// Equal as the config reads them: 3 and 3.0 are one number.
bool same_value(const Value& a, const Value& b) {
  const auto number = [](const Value& v) -> std::optional<double> {
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    if (const auto* d = std::get_if<double>(&v)) return *d;
    return std::nullopt;
  };
  if (number(a) && number(b)) return *number(a) == *number(b);
  return a == b;
}

// Set by something other than the JSON setting with this origin.
bool set_elsewhere(const SourceLocation& where, const std::string& origin) {
  return where.file != origin;
}

}  // namespace

std::vector<std::string> replaced_deepspeed_settings(const Config& config,
                                                     const DeepSpeedSettings& ds) {
  std::vector<std::string> lines;
  for (const ConfigSetting& s : ds.settings) {
    const std::optional<Resolved> r = resolved(config, s.key);
    if (!r || !r->set || !set_elsewhere(r->where, s.origin) || same_value(r->value, s.value))
      continue;
    lines.push_back(s.key + " = " + value_to_toml(r->value) + " (" + r->where.str() + ") over " +
                    value_to_toml(s.value) + " from " + s.origin +
                    ": the TOML and --set win over the JSON");
  }
  return lines;
}

void check_deepspeed_conditions(const Config& config, const DeepSpeedSettings& ds) {
  std::string problems;
  for (const DeepSpeedCondition& c : ds.conditions) {
    // Only while the JSON's setting is the one in force (the TOML may have replaced it too).
    const bool in_force = std::any_of(ds.settings.begin(), ds.settings.end(), [&](const auto& s) {
      if (s.origin != c.origin) return false;
      const std::optional<Resolved> r = resolved(config, s.key);
      return r && !set_elsewhere(r->where, s.origin);
    });
    const std::optional<Resolved> need = resolved(config, c.key);
    if (!in_force || !need || same_value(need->value, c.value)) continue;
    problems += std::string(problems.empty() ? "" : "\n") + c.origin + " " + c.why +
                ", and the job has " + c.key + " = " + value_to_toml(need->value) + " (" +
                need->where.str() + "): set " + c.key + " = " + value_to_toml(c.value) +
                " there, or remove the key from the JSON";
  }
  if (!problems.empty()) throw ConfigError(problems);
}

}  // namespace zt::trainer
