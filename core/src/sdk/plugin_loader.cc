#include "zt/host/plugin_loader.h"

#include "zt/offload.h"

#include <dlfcn.h>

#include <algorithm>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <utility>

#include "util/article.h"
#include "zt/codec.h"
#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/host/did_you_mean.h"
#include "zt/model_plugin.h"
#include "zt/optimizer.h"
#include "zt/options.h"
#include "zt/shard_strategy.h"

namespace fs = std::filesystem;

namespace zt {

namespace {

constexpr const char kInfoSymbol[] = "zt_plugin_info_v1";
constexpr const char kFactorySymbol[] = "zt_plugin_factory_v1";
constexpr const char kRebuildHint[] =
    "rebuild the plugin against this zt SDK (find_package(zt) + zt_add_plugin)";

// Libraries are never unloaded: objects a plugin made may be destroyed late (static teardown).
std::mutex& library_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, boost::dll::shared_library>& libraries() {
  static auto* libs = new std::map<std::string, boost::dll::shared_library>();
  return *libs;
}

bool looks_like_elf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic,
                                         "\x7f"
                                         "ELF",
                                         4) == 0;
}

std::string field(const std::string& fingerprint, const std::string& key) {
  std::string prefix = key + "=";
  size_t pos = 0;
  while (pos < fingerprint.size()) {
    size_t end = fingerprint.find(';', pos);
    if (end == std::string::npos) end = fingerprint.size();
    std::string part = fingerprint.substr(pos, end - pos);
    if (part.rfind(prefix, 0) == 0) return part.substr(prefix.size());
    pos = end + 1;
  }
  return "?";
}

std::string fingerprint_diff(const std::string& plugin, const std::string& core) {
  std::string out;
  for (const char* key : {"compiler", "cxx11abi", "torch", "cuda"}) {
    std::string a = field(plugin, key), b = field(core, key);
    if (a != b) out += std::string(out.empty() ? "" : ", ") + key + " " + a + " vs " + b;
  }
  return out;
}

std::string id_from_file_name(const std::string& name) {
  const std::string prefix = "libzt_", suffix = ".so";
  if (name.size() <= prefix.size() + suffix.size()) return "";
  if (name.rfind(prefix, 0) != 0) return "";
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return "";
  const std::string id = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  // zt's own library, not a plugin: a search path that reaches lib/ (ZT_PLUGIN_PATH=/opt/zt/lib
  // for lib/zt/plugins) listed it as a broken plugin, and `trainer plugins list` exited 3.
  return id == "core" ? "" : id;
}

// Why dlopen refused `path`, as a message with the way out. The dynamic linker's own text names
// the file and, for an unresolved symbol, the symbol ("...: undefined symbol: foo").
std::string load_failure(const std::string& path, const std::string& fallback) {
  const char* why = dlerror();
  if (why == nullptr) {
    // Something between the failed dlopen and here consumed the text: ask once more.
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      dlclose(handle);
    } else {
      why = dlerror();
    }
  }
  std::string reason = why ? why : fallback;
  std::string way_out = kRebuildHint;
  // A library the plugin links that the dynamic linker does not find (an install stripped the
  // build tree's RUNPATH): rebuilding against the SDK does not help; finding it does.
  const std::string missing = ": cannot open shared object file";
  if (const size_t end = reason.find(missing); end != std::string::npos) {
    const size_t start = reason.rfind(": ", end - 1);
    const std::string library = reason.substr(start == std::string::npos ? 0 : start + 2,
                                              end - (start == std::string::npos ? 0 : start + 2));
    way_out = "the plugin links " + library +
              ", which the dynamic linker does not find: install it where the system looks "
              "(ldconfig), give the plugin a RUNPATH to its folder (zt_add_plugin sets "
              "INSTALL_RPATH_USE_LINK_PATH for what it links), or add the folder to "
              "LD_LIBRARY_PATH";
  }
  const std::string undefined = "undefined symbol: ";
  const size_t at = reason.find(undefined);
  if (at != std::string::npos) {
    const std::string symbol = reason.substr(at + undefined.size());
    const auto in = [&](std::initializer_list<const char*> prefixes) {
      for (const char* p : prefixes) {
        if (symbol.rfind(p, 0) == 0) return true;
      }
      return false;
    };
    // zt's own C++ (a base class's default defined out of line in a later SDK): no LINK helps.
    if (in({"_ZN2zt", "_ZNK2zt", "_ZTVN2zt", "_ZTIN2zt", "_ZTSN2zt"})) {
      way_out = "the plugin was built against another zt SDK than this zt (plugin ABI " +
                std::to_string(ZT_PLUGIN_ABI_VERSION) + "), which does not define it; " +
                kRebuildHint;
    } else if (in({"_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch", "_ZNK5torch"})) {
      way_out = "the plugin was built against another LibTorch than this zt's (torch " +
                field(ZT_BUILD_FINGERPRINT, "torch") + "); " + kRebuildHint;
    } else {
      way_out = "the plugin needs a symbol that neither it nor the libraries it links provide: "
                "link the library that defines it (zt_add_plugin(<id> ... LINK <target>)) or " +
                way_out;
    }
  }
  return "cannot load plugin " + path + ": " + reason + "; " + way_out;
}

// The library at `path`, loaded once per process. REQUIRES: library_mutex() held.
boost::dll::shared_library& open_library(const std::string& path) {
  auto& libs = libraries();
  auto it = libs.find(path);
  if (it == libs.end()) {
    boost::dll::shared_library lib;
    boost::dll::fs::error_code ec;
    // RTLD_NOW: every symbol the plugin needs is bound here, so one that nothing provides fails
    // this load, named by the dynamic linker, instead of killing the process at its first call.
    lib.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
    if (ec) throw PluginError(load_failure(path, ec.message()));
    it = libs.emplace(path, std::move(lib)).first;
  }
  return it->second;
}

// The plugin's C info entry, checked before any of its C++ is called: ABI version, then the
// build fingerprint.
const ZtPluginInfoV1& checked_info(boost::dll::shared_library& lib, const std::string& path) {
  if (!lib.has(kInfoSymbol)) {
    throw PluginError("plugin " + path + " does not export '" + kInfoSymbol +
                      "': it is not a zt plugin, or was built without ZT_PLUGIN(...); " +
                      kRebuildHint);
  }
  auto info_fn = reinterpret_cast<ZtPluginInfoFnV1>(lib.get<void()>(kInfoSymbol));
  const ZtPluginInfoV1* info = info_fn();
  if (info == nullptr) {
    throw PluginError("plugin " + path + ": " + kInfoSymbol + "() returned null");
  }
  if (info->abi_version != ZT_PLUGIN_ABI_VERSION) {
    throw PluginError("plugin " + path + " was built for zt plugin ABI " +
                      std::to_string(info->abi_version) + ", this zt has ABI " +
                      std::to_string(ZT_PLUGIN_ABI_VERSION) + "; " + kRebuildHint);
  }
  std::string fingerprint = info->build_fingerprint ? info->build_fingerprint : "";
  if (fingerprint != core_build_fingerprint()) {
    throw PluginError("plugin " + path + " has build fingerprint '" + fingerprint +
                      "' but this zt core has '" + core_build_fingerprint() + "' (" +
                      fingerprint_diff(fingerprint, core_build_fingerprint()) + "); " +
                      kRebuildHint);
  }
  return *info;
}

// What the info entry says, with its id checked against the file name and its kind known.
PluginRecord record_of(const ZtPluginInfoV1& info, const std::string& path) {
  PluginRecord record;
  record.id = info.id ? info.id : "";
  record.path = path;
  record.kind = info.kind;
  record.version = info.version ? info.version : "";
  record.fingerprint = info.build_fingerprint ? info.build_fingerprint : "";
  record.summary = info.summary ? info.summary : "";
  std::string expected = id_from_file_name(fs::path(path).filename().string());
  if (!expected.empty() && record.id != expected) {
    throw PluginError("plugin " + path + " says its id is '" + record.id +
                      "' but its file name says '" + expected +
                      "'; the file must be named libzt_<id>.so");
  }
  if (std::strcmp(plugin_kind_name(record.kind), "unknown") == 0) {
    std::string known;
    for (uint32_t k = 1; std::strcmp(plugin_kind_name(static_cast<ZtPluginKind>(k)), "unknown");
         ++k) {
      known += (known.empty() ? "" : ", ") + std::to_string(k) + " " +
               plugin_kind_name(static_cast<ZtPluginKind>(k));
    }
    throw PluginError("plugin " + path + " declares unknown kind " +
                      std::to_string(static_cast<uint32_t>(record.kind)) + " (known: " + known +
                      "); " + kRebuildHint);
  }
  return record;
}

// The class a factory of `kind` derives from, and whether `factory` does. The catalog's typed
// accessors cast to that class: a factory of another (ZT_PLUGIN's kind changed, not the class's
// base) called a virtual function it does not have, a crash with no message.
std::pair<const char*, bool> factory_class_check(ZtPluginKind kind, const Plugin* factory) {
  switch (kind) {
    case ZT_KIND_COMM:
      return {"zt::CommunicatorPlugin", dynamic_cast<const CommunicatorPlugin*>(factory)};
    case ZT_KIND_SHARD:
      return {"zt::ShardStrategyPlugin", dynamic_cast<const ShardStrategyPlugin*>(factory)};
    case ZT_KIND_OFFLOAD: return {"zt::OffloadPlugin", dynamic_cast<const OffloadPlugin*>(factory)};
    case ZT_KIND_OPTIMIZER:
      return {"zt::OptimizerPlugin", dynamic_cast<const OptimizerPlugin*>(factory)};
    case ZT_KIND_MODEL: return {"zt::ModelPlugin", dynamic_cast<const ModelPlugin*>(factory)};
    case ZT_KIND_CODEC: return {"zt::CodecPlugin", dynamic_cast<const CodecPlugin*>(factory)};
    default: return {"zt::Plugin", true};
  }
}

// The plugin's factory object; a factory that throws or returns null is the plugin's error.
Plugin* call_factory(boost::dll::shared_library& lib, const std::string& path) {
  if (!lib.has(kFactorySymbol)) {
    throw PluginError("plugin " + path + " does not export its factory '" + kFactorySymbol +
                      "' (BOOST_DLL_ALIAS in ZT_PLUGIN); " + kRebuildHint);
  }
  auto factory_fn = lib.get_alias<Plugin*()>(kFactorySymbol);
  Plugin* factory = nullptr;
  try {
    factory = factory_fn();
  } catch (const std::exception& e) {
    throw PluginError("plugin " + path + ": its factory threw: " + e.what());
  } catch (...) {
    throw PluginError("plugin " + path + ": its factory threw a non-standard exception");
  }
  if (factory == nullptr) {
    throw PluginError("plugin " + path + ": its factory returned null");
  }
  return factory;
}

// The plugin's option specs as the config loader will use them: a name a TOML key can write,
// each name once, and a default its own spec accepts. create() is promised values that passed
// check_option, and a checkpoint's config (printed with every default) is read back through
// it: a default out of range, or a name given twice, made every such config unreadable.
void check_option_specs(const Plugin& factory, const std::string& id, const std::string& path) {
  std::vector<OptionSpec> specs;
  try {
    specs = factory.options();
  } catch (const std::exception& e) {
    throw PluginError("plugin " + path + ": its options() threw: " + e.what());
  }
  const auto refuse = [&](const std::string& name, const std::string& why) {
    throw PluginError("plugin " + path + " declares option '" + name + "' " + why +
                      "; fix the plugin's options()");
  };
  std::vector<std::string> seen;
  for (const OptionSpec& spec : specs) {
    const bool bare = !spec.name.empty() &&
                      std::all_of(spec.name.begin(), spec.name.end(), [](char c) {
                        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                               (c >= '0' && c <= '9') || c == '_' || c == '-';
                      });
    if (!bare) refuse(spec.name, "with a name a TOML bare key cannot write (A-Z a-z 0-9 _ -)");
    if (std::find(seen.begin(), seen.end(), spec.name) != seen.end()) refuse(spec.name, "twice");
    seen.push_back(spec.name);
    try {
      check_option(spec, spec.default_value, "plugin." + id, SourceLocation{"default", 0, 0});
    } catch (const ConfigError& e) {
      refuse(spec.name, std::string("whose default its own spec refuses (") + e.what() + ")");
    }
  }
}

}  // namespace

const char* core_build_fingerprint() { return ZT_BUILD_FINGERPRINT; }

void throw_created_null(const std::string& id, const char* kind) {
  throw PluginError("plugin '" + id + "' (" + kind +
                    "): create() returned null; a plugin's create() returns what it makes or "
                    "throws the reason (report it to the plugin's authors)");
}

std::string builtin_plugin_dir() {
  boost::dll::fs::error_code ec;
  fs::path core = boost::dll::this_line_location(ec);
  if (ec) return "";
  return (core.parent_path() / "zt" / "plugins").string();
}

PluginRecord load_plugin_file(const std::string& path) {
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (ec) {  // a folder this user may not search: not "does not exist"
    throw PluginError("cannot look at plugin file " + path + " (" + ec.message() +
                      "); make its folder readable, or remove it from the plugin search path");
  }
  if (!exists) {
    // A link whose target went (a rebuilt or removed build folder) is listed in its folder and
    // shadows the same plugin in later folders.
    const fs::path target = fs::is_symlink(path, ec) ? fs::read_symlink(path, ec) : fs::path();
    if (!target.empty()) {
      throw PluginError("plugin file " + path + " is a broken symbolic link (to " +
                        target.string() +
                        "): remove it or rebuild the plugin; it hides that plugin in later "
                        "folders of the search path (plugins.dirs, ZT_PLUGIN_PATH)");
    }
    throw PluginError("plugin file " + path +
                      " does not exist; check the path, or list the plugins found with trainer "
                      "plugins");
  }
  if (!looks_like_elf(path)) {
    throw PluginError("plugin file " + path +
                      " is not a shared object (no ELF header); remove it from the plugin "
                      "search path or rebuild it");
  }
  std::lock_guard<std::mutex> lock(library_mutex());
  boost::dll::shared_library& lib = open_library(path);
  PluginRecord record = record_of(checked_info(lib, path), path);
  record.factory = call_factory(lib, path);
  const auto [kind_class, derives] = factory_class_check(record.kind, record.factory);
  if (!derives) {
    throw PluginError("plugin " + path + " declares kind " + plugin_kind_name(record.kind) +
                      ", but its factory class does not derive from " + kind_class +
                      " (ZT_PLUGIN's kind and factory class must agree); " + kRebuildHint);
  }
  check_option_specs(*record.factory, record.id, path);
  return record;
}

PluginCatalog::PluginCatalog(const std::vector<std::string>& config_dirs) {
  dirs_ = config_dirs;
  if (const char* env = std::getenv("ZT_PLUGIN_PATH")) {
    std::string all = env;
    size_t pos = 0;
    while (pos <= all.size()) {
      size_t end = all.find(':', pos);
      if (end == std::string::npos) end = all.size();
      if (end > pos) dirs_.push_back(all.substr(pos, end - pos));
      pos = end + 1;
    }
  }
  std::string builtin = builtin_plugin_dir();
  if (!builtin.empty()) dirs_.push_back(builtin);
  for (const auto& dir : dirs_) {
    std::error_code ec;
    const fs::file_status status = fs::status(dir, ec);
    if (!fs::exists(status)) {
      // A relative folder is the current directory's: a job started elsewhere missed it.
      unsearched_[dir] = fs::path(dir).is_relative() ? "missing under the current directory " +
                                                           fs::current_path(ec).string()
                                                     : "missing";
      continue;
    }
    if (!fs::is_directory(status)) {
      unsearched_[dir] = "not a folder";
      continue;
    }
    std::vector<fs::path> files;
    fs::directory_iterator it(dir, ec);
    if (ec) {
      unsearched_[dir] = "unreadable: " + ec.message();
      continue;
    }
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      std::string id = id_from_file_name(file.filename().string());
      if (!id.empty() && !paths_.count(id)) paths_[id] = file.string();
    }
  }
}

std::string PluginCatalog::unsearched_reason(const std::string& dir) const {
  const auto it = unsearched_.find(dir);
  return it == unsearched_.end() ? "" : it->second;
}

std::vector<std::string> PluginCatalog::ids() const {
  std::vector<std::string> out;
  for (const auto& [id, path] : paths_) out.push_back(id);
  return out;
}

std::string PluginCatalog::path_of(const std::string& id) const {
  auto it = paths_.find(id);
  return it == paths_.end() ? "" : it->second;
}

const PluginRecord& PluginCatalog::load(const std::string& id) {
  auto done = loaded_.find(id);
  if (done != loaded_.end()) return done->second;
  std::string path = path_of(id);
  if (path.empty()) {
    std::string found, looked;
    for (const auto& [i, p] : paths_) found += (found.empty() ? "" : ", ") + i;
    for (const auto& d : dirs_) {
      const std::string why = unsearched_reason(d);
      looked += (looked.empty() ? "" : ", ") + d + (why.empty() ? "" : " (" + why + ")");
    }
    throw PluginError("plugin '" + id + "' not found" + did_you_mean(id, ids()) +
                      ". Found: " + (found.empty() ? "none" : found) +
                      ". Looked in: " + (looked.empty() ? "(no directories)" : looked) +
                      ". Add its folder to plugins.dirs or ZT_PLUGIN_PATH.");
  }
  return loaded_.emplace(id, load_plugin_file(path)).first->second;
}

const PluginRecord& PluginCatalog::load_kind(const std::string& id, ZtPluginKind kind,
                                             const std::string& role) {
  const PluginRecord& record = load(id);
  if (record.kind != kind) {
    std::string same_kind;
    for (auto& entry : load_all()) {
      if (entry.record && entry.record->kind == kind) {
        same_kind += (same_kind.empty() ? "" : ", ") + entry.id;
      }
    }
    throw ConfigError(role + " = \"" + id + "\" names " +
                      with_article(plugin_kind_name(record.kind)) + " plugin, but " + role +
                      " needs " + with_article(plugin_kind_name(kind)) +
                      " plugin (available: " + (same_kind.empty() ? "none" : same_kind) + ")");
  }
  return record;
}

const CommunicatorPlugin& PluginCatalog::comm(const std::string& id) {
  return *static_cast<const CommunicatorPlugin*>(
      load_kind(id, ZT_KIND_COMM, "plugins.comm").factory);
}

const ShardStrategyPlugin& PluginCatalog::shard(const std::string& id) {
  return *static_cast<const ShardStrategyPlugin*>(
      load_kind(id, ZT_KIND_SHARD, "plugins.shard").factory);
}

const OptimizerPlugin& PluginCatalog::optimizer(const std::string& id) {
  return *static_cast<const OptimizerPlugin*>(
      load_kind(id, ZT_KIND_OPTIMIZER, "plugins.optimizer").factory);
}

const OffloadPlugin& PluginCatalog::offload(const std::string& id, const std::string& role) {
  return *static_cast<const OffloadPlugin*>(load_kind(id, ZT_KIND_OFFLOAD, role).factory);
}

const CodecPlugin& PluginCatalog::codec(const std::string& id, const std::string& role) {
  return *static_cast<const CodecPlugin*>(load_kind(id, ZT_KIND_CODEC, role).factory);
}

std::vector<PluginCatalog::Entry> PluginCatalog::load_all() {
  std::vector<Entry> out;
  for (const auto& [id, path] : paths_) {
    Entry entry{id, path, nullptr, ""};
    try {
      entry.record = std::make_unique<PluginRecord>(load(id));
    } catch (const Error& e) {
      entry.error = e.what();
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace zt
