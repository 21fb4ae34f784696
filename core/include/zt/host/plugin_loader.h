// Finding and loading plugins. A catalog knows the search path (config plugins.dirs, then
// ZT_PLUGIN_PATH, then the plugin folder next to libzt_core: lib/zt/plugins) and the files
// named libzt_<id>.so in it; loading one checks, in order: it is a shared object, it loads with
// every symbol resolved (RTLD_NOW, so a missing symbol fails here, naming it, instead of crashing
// at first use), it exports zt_plugin_info_v1, its ABI version and build fingerprint match this
// core, its id matches its file name, its kind is known, it exports the factory entry; only then
// is the factory called. Every failure is a PluginError naming the file, the symbol or field,
// and the way out.
//
// Search folders are used as given: a relative folder (in plugins.dirs or ZT_PLUGIN_PATH) is
// resolved against the process's current working folder, not against the config file's folder.
// Loaded libraries stay loaded for the life of the process (objects they made may outlive any
// scope we could pick).
//
// Thread safety: load_plugin_file() may be called from any thread (the table of open libraries
// is locked). A PluginCatalog is not thread-safe: build it and load from one thread; the
// records and factories it hands out may then be used from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zt/api.h"
#include "zt/plugin.h"

namespace zt {

class CodecPlugin;
class CommunicatorPlugin;
class OffloadPlugin;
class OptimizerPlugin;
class ShardStrategyPlugin;

// A loaded, checked plugin: copies of its info entry's fields, and its factory.
struct PluginRecord {
  std::string id;
  std::string path;  // the file it was loaded from
  ZtPluginKind kind = ZT_KIND_UNKNOWN;
  std::string version;
  std::string fingerprint;
  std::string summary;
  Plugin* factory = nullptr;  // owned by the plugin library; lives as long as the process
};

// The fingerprint of this core build (what plugins must match). Never throws.
ZT_API const char* core_build_fingerprint();
// The folder next to libzt_core where zt's own plugins live (build and install trees alike);
// empty if libzt_core's own location cannot be found. Never throws.
ZT_API std::string builtin_plugin_dir();
// Loads one file with every check above, whatever its folder.
//   path: in, the file (relative paths resolve from the current folder).
//   returns: the record; loading the same path again reuses the open library.
// Throws PluginError: no such file, not an ELF file, dlopen failed (unresolved symbol: the
// message names the file and the symbol), no info entry, other ABI version or fingerprint
// (both sides printed), id not matching the file name, unknown kind, no factory entry, a
// factory that threw or returned null, a factory whose class is not its kind's.
ZT_API PluginRecord load_plugin_file(const std::string& path);

// Throws PluginError: plugin `id` (of `kind`, e.g. "codec") made nothing; its create() must return
// the object or throw.
[[noreturn]] ZT_API void throw_created_null(const std::string& id, const char* kind);

// What plugin `id`'s create() returned, refused when null (a third party's create() may return
// null on some path: a crash later, or for a codec, silently no codec at all). Every caller of a
// factory's create() goes through it.
template <class T>
std::unique_ptr<T> created_by(std::unique_ptr<T> made, const std::string& id, const char* kind) {
  if (!made) throw_created_null(id, kind);
  return made;
}

class ZT_API PluginCatalog {
 public:
  // Builds the search path and lists the libzt_<id>.so files in it; loads nothing.
  //   config_dirs: in, folders searched first, in order (plugins.dirs, and the trainer's
  //                --plugin-dir folders where it takes them). Then ZT_PLUGIN_PATH
  //                (':'-separated, read now), then builtin_plugin_dir(). Folders that do not
  //                exist are skipped silently (they still appear in search_dirs()).
  // When two folders hold the same id, the first in search order wins. Never throws.
  explicit PluginCatalog(const std::vector<std::string>& config_dirs = {});

  // Every folder searched, in order, including those that do not exist.
  const std::vector<std::string>& search_dirs() const { return dirs_; }
  // Why a search folder was not searched ("missing", "not a folder", the OS's reason), "" when
  // it was.
  std::string unsearched_reason(const std::string& dir) const;
  // Ids found by file name (libzt_<id>.so), sorted; nothing is loaded.
  std::vector<std::string> ids() const;
  // The file a given id resolves to; empty when not found.
  std::string path_of(const std::string& id) const;

  // Loads (once per catalog) and checks a plugin.
  //   id: in, the plugin id.
  //   returns: the record, valid as long as the catalog.
  // Throws PluginError: not found (the message lists the ids found, with a did-you-mean, and
  // the folders searched), or any load_plugin_file() failure.
  const PluginRecord& load(const std::string& id);
  // load(id), then checks that the plugin is of `kind`.
  //   role: in, the config key that selected it (e.g. "plugins.comm"), for the message.
  // Throws what load() throws, and ConfigError when the kind differs (naming the role, both
  // kinds and the plugins of the right kind that load).
  const PluginRecord& load_kind(const std::string& id, ZtPluginKind kind, const std::string& role);
  // load_kind() for one kind, returning the factory as its kind's class. Throw as load_kind().
  const CommunicatorPlugin& comm(const std::string& id);
  const ShardStrategyPlugin& shard(const std::string& id);
  const OptimizerPlugin& optimizer(const std::string& id);
  // `role` is the config key that named it: "plugins.offload_optimizer" or "plugins.offload_param".
  const OffloadPlugin& offload(const std::string& id, const std::string& role);
  // `role` is the config key that named it: "plugins.codec_weights" or "plugins.codec_gradients".
  const CodecPlugin& codec(const std::string& id, const std::string& role);

  // One entry per id found: the record, or why it could not be loaded.
  struct Entry {
    std::string id;
    std::string path;
    std::unique_ptr<PluginRecord> record;  // null when loading failed
    std::string error;                     // the PluginError's message when it failed
  };
  // Tries every id found, in id order; a broken plugin becomes an entry with its error, never
  // an exception, so one bad file cannot hide the others.
  std::vector<Entry> load_all();

 private:
  std::vector<std::string> dirs_;
  std::map<std::string, std::string> paths_;       // id -> file
  std::map<std::string, std::string> unsearched_;  // folder -> why it was not searched
  std::map<std::string, PluginRecord> loaded_;
};

}  // namespace zt
