// The run configuration: a TOML file plus --set overrides, validated as a whole before any rank
// starts work. Core sections ([run], [launch], [model], [data], [precision], [zero], [plugins])
// are checked against config_schema(); each [plugin.<id>] table against the options its plugin
// declares. Every error names file:line:column (or the --set that caused it) and the way out;
// all errors found are reported together in one ConfigError.
// Thread safety: immutable after load; share freely.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "zt/api.h"
#include "zt/options.h"

namespace zt {

class PluginCatalog;

struct SectionSpec {
  std::string name;  // "zero"
  std::string doc;
  std::vector<OptionSpec> keys;
};

// The core sections, in the order they are printed.
ZT_API const std::vector<SectionSpec>& config_schema();

// The [plugins] keys that select a plugin, with the kind each needs: {"comm", ZT_KIND_COMM}, ...
struct PluginRole {
  std::string key;    // "comm", "shard", "optimizer", "offload_optimizer", "offload_param"
  uint32_t kind = 0;  // ZtPluginKind
};
ZT_API const std::vector<PluginRole>& plugin_roles();

class ZT_API Config {
 public:
  // Parses and validates. `overrides` are "section.key=value" (value in TOML syntax; bare words
  // are taken as strings), applied in order after the file.
  static Config load_file(const std::string& path, const std::vector<std::string>& overrides = {});
  static Config load_string(const std::string& toml_text, const std::string& source_name,
                            const std::vector<std::string>& overrides = {});

  // Only the plugin search path, [plugins] dirs (with the --set overrides of plugins.dirs), for
  // commands that need nothing else (`trainer plugins ...`): other sections are not validated.
  // Throws ConfigError for malformed TOML or a dirs value that is not an array of strings.
  static std::vector<std::string> plugin_dirs_of_file(const std::string& path,
                                                      const std::vector<std::string>& overrides = {});
  static std::vector<std::string> plugin_dirs_of_string(const std::string& toml_text,
                                                        const std::string& source_name,
                                                        const std::vector<std::string>& overrides = {});

  const std::string& source() const { return source_; }
  const Options& section(const std::string& name) const;
  // The validated [plugin.<id>] table of a selected or mentioned plugin (defaults when absent).
  const Options& plugin_options(const std::string& id) const;
  // (role, id) of every non-empty [plugins] selection, in plugin_roles() order.
  std::vector<std::pair<std::string, std::string>> selected_plugins() const;
  PluginCatalog& catalog() const { return *catalog_; }

  // The resolved configuration as TOML, every key present; defaulted ones marked "# default".
  std::string to_toml() const;

 private:
  Config() = default;
  std::string source_;
  std::vector<Options> sections_;
  std::vector<Options> plugin_tables_;
  std::shared_ptr<PluginCatalog> catalog_;
};

}  // namespace zt
