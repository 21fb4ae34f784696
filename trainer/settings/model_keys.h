// [model] is one table for every model kind: n_layer means something to a GPT, nothing to an
// MLP. A key the chosen kind does not read is dropped (a user who wrote n_layer = 24 under
// kind = "mlp" trains an 8-layer MLP), so the config's first load warns about each.
// Not an error: a resolved config (--print-config, tune's tuned.toml, a checkpoint's) prints every
// key the user set, so one whose kind came from --set (--set model.kind=mlp over a GPT config,
// as tests and benchmarks do) holds keys of the file's kind and must still load. Such a --set
// says itself that the file's keys of another kind go unused: no warning for those.
// Thread safety: a free function.
#pragma once

#include <string>
#include <vector>

#include "zt/host/config.h"

namespace zt::trainer {

// One line per [model] key the user set that model.kind does not read (but the file's keys when
// --set chose the kind): its place, the kinds that read it, and the way out. Empty when every
// set key is read.
std::vector<std::string> unused_model_keys(const Config& config);

}  // namespace zt::trainer
