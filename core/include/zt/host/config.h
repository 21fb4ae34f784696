// The run configuration: a TOML file plus --set overrides, validated as a whole before any rank
// starts work. Core sections ([run], [launch], [model], [data], [precision], [zero], [plugins])
// are checked against config_schema(); each [plugin.<id>] table against the options its plugin
// declares (loading the selected plugins to ask them). Every error names file:line:column (or
// the --set that caused it) and the way out; all errors found are reported together in one
// exception.
// Thread safety: a Config is immutable after load, so its const methods may be called from any
// thread; catalog() is the exception (a PluginCatalog is not thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zt/api.h"
#include "zt/options.h"

// plugin.h's enum, declared here so this header does not pull in Boost.DLL.
enum ZtPluginKind : uint32_t;

namespace zt {

class Config;
class PluginCatalog;

struct SectionSpec {
  std::string name;  // "zero"
  std::string doc;
  std::vector<OptionSpec> keys;
};

// The sections a config has, in the order they are printed: the core's, then those programs
// added (add_config_sections). Never throws.
ZT_API const std::vector<SectionSpec>& config_schema();
// The spec of `key` in section `section` of config_schema(), or nullptr (a plugin's table, or no
// such key).
ZT_API const OptionSpec* config_option(const std::string& section, const std::string& key);

// A rule across keys (offload_param needs stage 3, ...), checked once every section validated:
// it appends one message per break to `broken`, each naming the keys with file:line:column
// (key_at) and the way out. Pure; never throws.
using ConfigBreaks = std::vector<std::string>;
struct ConfigRule {
  std::string name;  // what it requires, for tests and readers
  std::function<void(const Config&, ConfigBreaks& broken)> check;
};
// Where `key` of `section` was set, as a rule's message names it: "file:line:column", "--set"
// or "default". Never throws.
ZT_API std::string key_at(const Options& section, const std::string& key);
// Every rule load_file()/load_string() checks, in order: the core's, then programs'. Never
// throws.
ZT_API const std::vector<ConfigRule>& config_rules();

// A program's own sections and rules, beside the core's (the trainer declares [model], [data],
// [checkpoint], [ab] and the learning-rate keys of [run] this way): every later load validates,
// defaults and prints them like the core's. A section named like an existing one adds its keys
// to it. Call it once, before any load and before other threads read the schema (references
// config_schema() and config_rules() returned before may then be stale).
// Throws InternalError for a key the section already has.
ZT_API void add_config_sections(std::vector<SectionSpec> sections,
                                std::vector<ConfigRule> rules = {});

// The [plugins] keys that select a plugin, with the kind each needs: {"comm", ZT_KIND_COMM}, ...
struct PluginRole {
  std::string key;      // "comm", "shard", "optimizer", "offload_optimizer", "offload_param"
  ZtPluginKind kind{};  // the kind the selected plugin must be (ZT_KIND_UNKNOWN until set)
};
ZT_API const std::vector<PluginRole>& plugin_roles();

// A value from another source than the TOML file (a DeepSpeed JSON config): applied before the
// file, so the file and the --set overrides win over it.
struct ConfigSetting {
  std::string key;     // "section.key" or "plugin.<id>.key"
  Value value;         // checked against the key's spec like a file's value
  std::string origin;  // names it in messages and --print-config: "ds.json: fp16.enabled"
};

class ZT_API Config {
 public:
  // Parses and validates a file.
  //   path:      in, the TOML file (relative to the current folder), named in every message.
  //   overrides: in, "section.key=value" strings (the trainer's --set), applied in order after
  //              the file. The value is TOML (`3`, `true`, `"text"`, `["/d"]`, `[0.9, 0.95]`);
  //              a value that does not parse as TOML is taken as a bare string
  //              (plugins.shard=shard_tensor). "plugin.<id>.key=value" reaches a plugin's table.
  //   returns: the validated config: every declared key present, defaults filled in.
  // Builds the plugin catalog from plugins.dirs (relative folders resolve from the current
  // folder) and loads every plugin selected in [plugins] or configured by a [plugin.<id>] table,
  // to check its kind and its table.
  // Throws ConfigError listing every problem found (unreadable file, malformed TOML, unknown
  // section or key with a did-you-mean, wrong type, out of range, bad combination, a plugin of
  // the wrong kind), each with its file:line:column or --set; PluginError instead when the
  // first problem found was a plugin that cannot be found or loaded.
  //   base: in, settings applied before the file (see ConfigSetting).
  static Config load_file(const std::string& path, const std::vector<std::string>& overrides = {},
                          const std::vector<ConfigSetting>& base = {});
  // The text of a config file, read once (a caller that peeks before it loads reads one version
  // of a file that changes meanwhile). Throws ConfigError naming it when it cannot be read.
  static std::string read_file(const std::string& path);
  // As load_file(), from text; `source_name` stands for the file name in messages.
  static Config load_string(const std::string& toml_text, const std::string& source_name,
                            const std::vector<std::string>& overrides = {},
                            const std::vector<ConfigSetting>& base = {});
  // One key of a file with its --set overrides applied, before anything is validated (what
  // decides how to load the rest, e.g. run.deepspeed); nullopt when neither sets it. Throws
  // ConfigError for an unreadable file or malformed TOML.
  static std::optional<Value> peek_file(const std::string& path,
                                        const std::vector<std::string>& overrides,
                                        const std::string& section, const std::string& key);
  // As peek_file(), from text; `source_name` stands for the file name in messages.
  static std::optional<Value> peek_string(const std::string& toml_text,
                                          const std::string& source_name,
                                          const std::vector<std::string>& overrides,
                                          const std::string& section, const std::string& key);

  // Only the plugin search path, [plugins] dirs (with the --set overrides of plugins.dirs), for
  // commands that need nothing else (`trainer plugins ...`): other sections are not validated.
  // Throws ConfigError for malformed TOML or a dirs value that is not an array of strings.
  static std::vector<std::string> plugin_dirs_of_file(
      const std::string& path, const std::vector<std::string>& overrides = {});
  static std::vector<std::string> plugin_dirs_of_string(
      const std::string& toml_text, const std::string& source_name,
      const std::vector<std::string>& overrides = {});

  // The file name (or source_name) the config came from.
  const std::string& source() const { return source_; }
  // A section ("zero", "plugins", ..., or one a program added before the load). Throws
  // InternalError for a name not in config_schema() when the config was loaded (a bug: the schema
  // fixes the names).
  const Options& section(const std::string& name) const;
  // The validated [plugin.<id>] table of a plugin selected in [plugins] or given a table
  // (defaults when the file has none). Throws InternalError for any other id.
  const Options& plugin_options(const std::string& id) const;
  // Every validated [plugin.<id>] table (table() "plugin.<id>"): the selected plugins' and those
  // the file or --set gave a table, selected or not.
  const std::vector<Options>& plugin_tables() const { return plugin_tables_; }
  // The validated [codec.<role>] table ("weights", "gradients") of the codec plugins.codec_<role>
  // names (its defaults when the file has none). Throws InternalError for a role with no codec.
  const Options& codec_options(const std::string& role) const;
  // (role, id) of every non-empty [plugins] selection, in plugin_roles() order. Never throws.
  std::vector<std::pair<std::string, std::string>> selected_plugins() const;
  // The catalog the config was validated with; its selected plugins are already loaded.
  PluginCatalog& catalog() const { return *catalog_; }

  // The resolved configuration as TOML, every key present; defaulted ones marked "# default",
  // those from a ConfigSetting with its origin ("# from ds.json: fp16.enabled"). Never throws.
  std::string to_toml() const;

 private:
  Config() = default;
  std::string source_;
  std::vector<Options> sections_;
  std::vector<Options> plugin_tables_;
  std::vector<Options> codec_tables_;  // [codec.weights], [codec.gradients] of chosen codecs
  std::shared_ptr<PluginCatalog> catalog_;
};

}  // namespace zt
