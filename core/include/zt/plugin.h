// The plugin ABI: what a shared object must export to be a zt plugin, and the base class of
// every plugin's factory. A plugin is a file libzt_<id>.so that exports two entries:
//
//   1. zt_plugin_info_v1: a C-linkage function returning a POD ZtPluginInfoV1. The loader calls
//      it first and checks abi_version and build_fingerprint before any C++ entry is touched,
//      so a plugin built for another compiler/ABI/LibTorch fails with a message, not a crash.
//      The one exception is what the dynamic linker runs as it opens the file, before either
//      entry: the constructors of namespace-scope objects and static registrations (a
//      TORCH_LIBRARY block). Keep those out of a plugin (make objects function-local statics,
//      built on first use) so that a mismatched build is refused instead of crashing there.
//   2. zt_plugin_factory_v1: a Boost.DLL alias to a function returning the plugin's factory
//      object (a subclass of zt::Plugin for its kind), valid for the life of the process.
//
// Plugin authors write one ZT_PLUGIN(...) line; see examples/plugin_template/ (installed under
// share/zt/examples/plugin_template). The loader opens the file with RTLD_NOW, so every symbol
// the plugin needs must resolve at load: a missing one is a PluginError naming the file and the
// symbol, never a crash at first use.
//
// Thread safety: zt_plugin_info_v1 and the factory entry may be called from any thread, any
// number of times; they return the same objects each time. A factory (zt::Plugin subclass) is
// one object shared by every user of the plugin in the process: its const methods may be called
// from several threads at once, so it keeps no mutable state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/version.h>
#include <boost/dll/alias.hpp>

#include "zt/api.h"
#include "zt/options.h"

// Bumped whenever an interface in core/include/zt changes incompatibly (a virtual method added,
// removed or changed, a struct's layout changed). The loader refuses any other value.
// 2: Communicator::split; 3: FutureWork::on_complete (its layout); 4: Communicator::all_to_all,
// CommStats' all_to_all counters and the codec kind; 5: Optimizer::state_dtype and
// ShardTensors::seed (16-bit optimizer states); 6: Optimizer::master_dtype (bf16 master weights);
// 7: TrainableModel::set_training (evaluation without dropout); 8: Communicator::device;
// 9: ShardTensors::weight_decay (parameters exempt from weight decay)
#define ZT_PLUGIN_ABI_VERSION 9u

#ifndef ZT_WITH_CUDA
#define ZT_WITH_CUDA 0
#endif

#define ZT_STR_(x) #x
#define ZT_STR(x) ZT_STR_(x)
#if defined(__clang__)
#define ZT_COMPILER_ID "clang-" ZT_STR(__clang_major__)
#elif defined(__GNUC__)
#define ZT_COMPILER_ID "gcc-" ZT_STR(__GNUC__)
#else
#define ZT_COMPILER_ID "unknown"
#endif

// Everything that must agree between the core and a plugin for C++ objects to cross the
// boundary safely. Expanded in the plugin's own translation unit, so it records the plugin's
// build, not the core's.
#define ZT_BUILD_FINGERPRINT                                                                    \
  "compiler=" ZT_COMPILER_ID                                                                    \
  ";cxx11abi=" ZT_STR(_GLIBCXX_USE_CXX11_ABI) ";torch=" ZT_STR(TORCH_VERSION_MAJOR) "." ZT_STR( \
      TORCH_VERSION_MINOR) "." ZT_STR(TORCH_VERSION_PATCH) ";cuda=" ZT_STR(ZT_WITH_CUDA)

extern "C" {

// What kind of part a plugin supplies. Values are part of the ABI; the underlying type is fixed
// at uint32_t so the field below keeps the layout of the original uint32_t field.
enum ZtPluginKind : uint32_t {
  ZT_KIND_UNKNOWN = 0,    // not a plugin kind: what plugin_kind_from_name() returns for no match
  ZT_KIND_COMM = 1,       // zt::CommunicatorPlugin (communicator.h)
  ZT_KIND_SHARD = 2,      // zt::ShardStrategyPlugin (shard_strategy.h)
  ZT_KIND_OFFLOAD = 3,    // zt::OffloadPlugin (offload.h)
  ZT_KIND_OPTIMIZER = 4,  // zt::OptimizerPlugin (optimizer.h)
  ZT_KIND_MODEL = 5,      // zt::ModelPlugin (model_plugin.h)
  ZT_KIND_CODEC = 6       // zt::CodecPlugin (codec.h)
};

// Returned by zt_plugin_info_v1(). Plain C so it can be read whatever the plugin's C++ ABI.
// Every pointer is to a NUL-terminated string with static storage duration (string literals);
// the loader copies them and never frees them.
struct ZtPluginInfoV1 {
  uint32_t abi_version;           // ZT_PLUGIN_ABI_VERSION the plugin was built with
  ZtPluginKind kind;              // which factory class zt_plugin_factory_v1 returns
  const char* id;                 // the plugin id, equal to its file name libzt_<id>.so
  const char* version;            // the plugin's own version, e.g. "0.1.0"
  const char* build_fingerprint;  // ZT_BUILD_FINGERPRINT as expanded in the plugin
  const char* summary;            // one line for `trainer plugins list`
};

typedef const ZtPluginInfoV1* (*ZtPluginInfoFnV1)(void);

}  // extern "C"

// The layout every zt since ABI 1 reads: two 32-bit fields, then four pointers.
static_assert(sizeof(ZtPluginKind) == sizeof(uint32_t) &&
                  alignof(ZtPluginKind) == alignof(uint32_t),
              "ZtPluginKind must keep the size of the uint32_t ABI field");
static_assert(offsetof(ZtPluginInfoV1, kind) == sizeof(uint32_t) &&
                  offsetof(ZtPluginInfoV1, id) == 2 * sizeof(uint32_t),
              "ZtPluginInfoV1's layout is part of plugin ABI 1");

namespace zt {

// "comm", "shard", "offload", "optimizer", "model", "codec" (the names used in messages and by
// `trainer plugins list`), or "unknown" for any other value. Never throws; any thread.
ZT_API const char* plugin_kind_name(ZtPluginKind kind);
// The inverse of plugin_kind_name(): the kind named `name`, or ZT_KIND_UNKNOWN. Never throws.
ZT_API ZtPluginKind plugin_kind_from_name(const std::string& name);

// Base of every plugin's factory. Each kind's header adds the create(...) that makes the working
// object (CommunicatorPlugin in communicator.h, ShardStrategyPlugin in shard_strategy.h,
// OffloadPlugin in offload.h, OptimizerPlugin in optimizer.h, CodecPlugin in codec.h). The loader
// casts the factory to the class of the kind the info entry declares, so the two must agree.
//
// Lifetime: the factory is created on first call of the factory entry (a function-local static
// in ZT_PLUGIN) and lives until the process exits; libraries are never unloaded. Its constructor
// may throw: the loader reports that as a PluginError naming the file and the message.
class ZT_API Plugin {
 public:
  virtual ~Plugin();
  // The keys of this plugin's [plugin.<id>] table: name, type, default, doc and, for numbers, a
  // range, for strings, the allowed choices (see options.h).
  //   returns: the declared options, in the order `trainer plugins describe` prints them; may
  //            be empty (the table then accepts no key). Names must be unique and TOML bare
  //            keys (A-Z a-z 0-9 _ -), and each default must pass its own spec's range and
  //            choices: the loader refuses the plugin otherwise (PluginError naming the
  //            option). Build specs with opt_int(...), opt_bool(...) and the other builders in
  //            options.h.
  // The config loader checks the user's table against this list before any rank starts (type,
  // range, choices; unknown keys are a ConfigError with a did-you-mean), so create(...) only
  // sees valid values with every default filled in.
  // Throws: nothing expected (it runs for `trainer plugins describe` and for every config load);
  //         an exception escapes to that caller unchanged.
  // Thread safety: const and pure; any thread; must return the same list every time.
  virtual std::vector<OptionSpec> options() const = 0;
};

}  // namespace zt

// Declares a plugin in one line, at global namespace scope of exactly one .cc file of the plugin:
//   ZT_PLUGIN(ZT_KIND_COMM, "comm_ucx", "0.1.0", "UCX collectives", UcxCommPlugin)
//   kind:         a ZtPluginKind enumerator (ZT_KIND_COMM, ZT_KIND_SHARD, ...)
//   id:           string literal, the plugin id; must equal the file name libzt_<id>.so
//                 (zt_add_plugin defines ZT_PLUGIN_ID to it)
//   version:      string literal, the plugin's own version
//   summary:      string literal, one line for `trainer plugins list`
//   FactoryClass: default-constructible, derived from the kind's plugin class
// It defines zt_plugin_info_v1 (visible) and the factory entry zt_plugin_factory_v1.
#define ZT_PLUGIN(kind, id, version, summary, FactoryClass)                                     \
  extern "C" __attribute__((visibility("default"))) const ZtPluginInfoV1* zt_plugin_info_v1() { \
    static const ZtPluginInfoV1 info = {ZT_PLUGIN_ABI_VERSION, kind,   id, version,             \
                                        ZT_BUILD_FINGERPRINT,  summary};                        \
    return &info;                                                                               \
  }                                                                                             \
  namespace {                                                                                   \
  ::zt::Plugin* zt_plugin_factory_impl() {                                                      \
    static FactoryClass factory;                                                                \
    return &factory;                                                                            \
  }                                                                                             \
  }                                                                                             \
  BOOST_DLL_ALIAS(zt_plugin_factory_impl, zt_plugin_factory_v1)
