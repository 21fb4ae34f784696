// Activation checkpointing of one unit (model.activation_checkpointing): its forward runs
// without keeping activations and is recomputed in backward, trading about one more forward per
// unit for activation memory of only the units' inputs.
// Thread safety: the training thread only, like the units themselves.
#pragma once

#include <ATen/core/Tensor.h>

#include "zt/api.h"
#include "zt/unit.h"

namespace zt {

// Runs `unit.forward(input)` without grad and returns its output wired into autograd through a
// single node. When backward reaches that node it re-runs `unit.forward` on a detached copy of
// `input` with grad on (replaying the RNG state of the first run, so dropout masks repeat) and
// returns the gradients of `input` and of every parameter the unit lists. The node has the
// parameters as inputs, so:
//  - the output needs grad even when `input` does not (token ids), and the node is reached;
//  - each parameter's gradient reaches .grad through its own AccumulateGrad node once per
//    backward (a tied parameter's contributions summed first), exactly as without
//    checkpointing, which the engine's gradient-ready hooks count on.
// REQUIRES: the unit's parameters hold their values when the node runs (stage 3 re-gathers them
// in a hook on the returned tensor, which runs before the node). Without grad mode, or when
// nothing requires grad, this is just `unit.forward(input)`.
ZT_API at::Tensor checkpointed_forward(Unit& unit, const at::Tensor& input);

}  // namespace zt
