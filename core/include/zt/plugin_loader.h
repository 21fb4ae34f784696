// Finding and loading plugins. A catalog knows the search path (config plugins.dirs, then
// ZT_PLUGIN_PATH, then the plugin folder next to libzt_core: lib/zt/plugins) and the files
// named libzt_<id>.so in it; loading one checks, in order: it is a shared object, it exports
// zt_plugin_info_v1, its ABI version and build fingerprint match this core, and only then calls
// its factory. Every failure is a PluginError naming the file, the symbol and the way out.
// Loaded libraries stay loaded for the life of the process (objects they made may outlive any
// scope we could pick). Thread safety: a catalog is not thread-safe; load from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zt/api.h"
#include "zt/plugin.h"

namespace zt {

class CommunicatorPlugin;
class OffloadPlugin;
class OptimizerPlugin;
class ShardStrategyPlugin;

// A loaded, checked plugin.
struct PluginRecord {
  std::string id;
  std::string path;
  uint32_t kind = 0;
  std::string version;
  std::string fingerprint;
  std::string summary;
  Plugin* factory = nullptr;  // owned by the plugin library; lives as long as the process
};

// The fingerprint of this core build (what plugins must match).
ZT_API const char* core_build_fingerprint();
// The folder next to libzt_core where zt's own plugins live (build and install trees alike).
ZT_API std::string builtin_plugin_dir();
// Loads one file with every check above. Throws PluginError.
ZT_API PluginRecord load_plugin_file(const std::string& path);

class ZT_API PluginCatalog {
 public:
  // `config_dirs` come first, then ZT_PLUGIN_PATH (':'-separated), then builtin_plugin_dir().
  explicit PluginCatalog(const std::vector<std::string>& config_dirs = {});

  const std::vector<std::string>& search_dirs() const { return dirs_; }
  // Ids found by file name (libzt_<id>.so), first match in search order; nothing is loaded.
  std::vector<std::string> ids() const;
  // The file a given id resolves to; empty when not found.
  std::string path_of(const std::string& id) const;

  // Loads (once) and checks a plugin. When not found, the error lists the ids that were found
  // and where it looked.
  const PluginRecord& load(const std::string& id);
  // Loads and checks that the plugin is of `kind` (a ZtPluginKind); `role` names the config key
  // that selected it (e.g. "plugins.comm") for the message.
  const PluginRecord& load_kind(const std::string& id, uint32_t kind, const std::string& role);
  const CommunicatorPlugin& comm(const std::string& id);
  const ShardStrategyPlugin& shard(const std::string& id);
  const OptimizerPlugin& optimizer(const std::string& id);
  // `role` is the config key that named it: "plugins.offload_optimizer" or "plugins.offload_param".
  const OffloadPlugin& offload(const std::string& id, const std::string& role);

  // One entry per id found: the record, or why it could not be loaded.
  struct Entry {
    std::string id;
    std::string path;
    std::unique_ptr<PluginRecord> record;  // null when loading failed
    std::string error;
  };
  std::vector<Entry> load_all();

 private:
  std::vector<std::string> dirs_;
  std::map<std::string, std::string> paths_;  // id -> file
  std::map<std::string, PluginRecord> loaded_;
};

}  // namespace zt
