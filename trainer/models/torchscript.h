// model.kind = "torchscript": a module saved from PyTorch (torch.jit.script(m).save(path), or
// torch.jit.trace) trained by the engine like the built-in models. LibTorch's torch::jit::load
// reads it; its submodules become the units the engine runs, shards and gathers:
//   - by default the top-level children in the order they were registered (the order a
//     Sequential-style forward calls them), a ModuleList / Sequential child expanded into one
//     unit per element ("blocks.0", "blocks.1", ...);
//   - model.units = ["embed", "blocks.*", "head"] names them explicitly, in call order.
// The engine's own forward runs the units as a chain: unit i's output (one tensor) is unit i+1's
// input. That is checked on the first batch against the module's own forward
// (check_first_batch below). A module whose forward does more (a residual or a sum in the
// parent, a unit called twice) trains at ZeRO stages 0-2 with its own forward run as written
// (check_first_batch returns it: the engine's driven forward, parameters whole there); at stage 3,
// which must gather each unit around its call and has no module hooks in LibTorch, it is refused.
// Parameters keep the module's own names ("blocks.0.attn.qkv.weight"), so checkpoints and
// `trainer export` use them. A parameter two units share (a tied embedding and LM head: one
// tensor, or after torch.jit.save two tensors over one storage) is found by its storage and
// owned by its first unit; the later module is pointed at the owner's tensor, as DeepSpeed
// does for shared parameters. Buffers (masks, running statistics) stay in the module; the
// trainer broadcasts them from rank 0 before step 1 (TrainableModel::buffers).
// Initial values are the file's: each parameter is declared with an initialiser that copies its
// saved value, so every rank holds the whole file once while the engine is built; once the engine
// holds them (release_initial_values) a rank keeps only its shards.
// Thread safety: as TrainableModel: the training thread only.
#pragma once

#include <functional>
#include <memory>

#include "data/data_source.h"
#include "settings/job_settings.h"
#include "zt/model_plugin.h"

namespace zt::models {

// Loads model.path and prepares its units, loss and inputs.
// Throws ConfigError (naming model.path and where it was set, with the way out) for: a file that
// is not TorchScript (a torch.save() state dict, any other file), one saved by a newer PyTorch
// than this LibTorch reads (both versions), a module with no parameters or a frozen one, a
// model.units entry that matches no submodule (listing those that exist), a parameter no unit
// holds, units that overlap, model.loss = "method" without a loss method, a cross-entropy loss
// on vector data, missing or non-integer input sizes; IoError when the file cannot be read.
std::shared_ptr<TrainableModel> load_torchscript(const trainer::ModelSettings& model);

// Runs the first micro batch of `data` through the units in order and through the module's own
// forward, then the loss, with no autograd, before the engine takes the parameters; `stage` is
// the ZeRO stage it will train at. Returns the module's own forward where the two differ (the
// trainer then drives the engine's forward with it: Engine::begin_forward), except at stage 3;
// empty where the units are a chain, and for other models.
// REQUIRES: `model` came from load_torchscript() and no engine was built from it yet.
// Throws ConfigError for a unit whose forward fails (the module's own error, the unit, the input
// shape and dtype), units whose result differs from the module's forward at stage 3 (by shape,
// or by how much and where), a loss that is not a scalar, or not finite on `real_data`
// (synthetic samples span the whole vocab, which a model may rule out in part with -inf logits),
// or a loss method that reads parameters (the engine frees them outside their unit at stage 3).
// Does nothing for other models.
std::function<at::Tensor(const at::Tensor&)> check_first_batch(TrainableModel& model,
                                                               const data::DataSource& data,
                                                               int stage, bool real_data = true);

// Drops the saved values the declarations copy from, once an engine has taken them: later
// declarations initialise to zeros, for a rebuild that loads its values from a checkpoint (live
// A/B). Does nothing for other models.
void release_initial_values(TrainableModel& model);

}  // namespace zt::models
