// The plugin ABI. A plugin is a shared object (libzt_<id>.so) that exports two entries:
//
//   1. zt_plugin_info_v1: a C-linkage function returning a POD ZtPluginInfoV1. The loader calls
//      it first and checks abi_version and build_fingerprint before any C++ entry is touched,
//      so a plugin built for another compiler/ABI/LibTorch fails with a message, not a crash.
//   2. zt_plugin_factory_v1: a Boost.DLL alias to a function returning the plugin's factory
//      object (a subclass of zt::Plugin for its kind), valid for the life of the process.
//
// Plugin authors write one ZT_PLUGIN(...) line; see examples/plugin_template/.
// Thread safety: info and factory entries may be called from any thread; factories are stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/dll/alias.hpp>
#include <torch/version.h>

#include "zt/api.h"
#include "zt/options.h"

// Bumped whenever an interface in core/include/zt changes incompatibly.
#define ZT_PLUGIN_ABI_VERSION 1u

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
#define ZT_BUILD_FINGERPRINT                                                         \
  "compiler=" ZT_COMPILER_ID ";cxx11abi=" ZT_STR(_GLIBCXX_USE_CXX11_ABI)             \
  ";torch=" ZT_STR(TORCH_VERSION_MAJOR) "." ZT_STR(TORCH_VERSION_MINOR) "."         \
  ZT_STR(TORCH_VERSION_PATCH) ";cuda=" ZT_STR(ZT_WITH_CUDA)

extern "C" {

// What kind of part a plugin supplies. Values are part of the ABI.
enum ZtPluginKind : uint32_t {
  ZT_KIND_COMM = 1,     // zt::CommunicatorPlugin
  ZT_KIND_SHARD = 2,    // shard strategy
  ZT_KIND_OFFLOAD = 3,  // offload backend
  ZT_KIND_OPTIMIZER = 4 // optimizer
};

// Returned by zt_plugin_info_v1(). Plain C so it can be read whatever the plugin's C++ ABI.
struct ZtPluginInfoV1 {
  uint32_t abi_version;           // ZT_PLUGIN_ABI_VERSION the plugin was built with
  uint32_t kind;                  // a ZtPluginKind
  const char* id;                 // the plugin id, equal to its file name libzt_<id>.so
  const char* version;            // the plugin's own version, e.g. "0.1.0"
  const char* build_fingerprint;  // ZT_BUILD_FINGERPRINT as expanded in the plugin
  const char* summary;            // one line for `trainer plugins list`
};

typedef const ZtPluginInfoV1* (*ZtPluginInfoFnV1)(void);

}  // extern "C"

namespace zt {

ZT_API const char* plugin_kind_name(uint32_t kind);  // "comm", "shard", ... or "unknown"
// The kind name as used for the [plugins] keys and in messages, or 0 when unknown.
ZT_API uint32_t plugin_kind_from_name(const std::string& name);

// Base of every plugin's factory. Subclasses per kind add create(...) (see communicator.h).
class ZT_API Plugin {
 public:
  virtual ~Plugin();
  // The keys of this plugin's [plugin.<id>] table.
  virtual std::vector<OptionSpec> options() const = 0;
};

}  // namespace zt

// Declares a plugin in one line, at namespace scope of one .cc file of the plugin:
//   ZT_PLUGIN(ZT_KIND_COMM, "comm_ucx", "0.1.0", "UCX collectives", UcxCommPlugin)
// FactoryClass must be default-constructible and derive from the kind's plugin class.
#define ZT_PLUGIN(kind, id, version, summary, FactoryClass)                                  \
  extern "C" __attribute__((visibility("default"))) const ZtPluginInfoV1* zt_plugin_info_v1() { \
    static const ZtPluginInfoV1 info = {ZT_PLUGIN_ABI_VERSION, kind, id, version,             \
                                        ZT_BUILD_FINGERPRINT, summary};                        \
    return &info;                                                                            \
  }                                                                                          \
  namespace {                                                                                \
  ::zt::Plugin* zt_plugin_factory_impl() {                                                   \
    static FactoryClass factory;                                                             \
    return &factory;                                                                         \
  }                                                                                          \
  }                                                                                          \
  BOOST_DLL_ALIAS(zt_plugin_factory_impl, zt_plugin_factory_v1)
