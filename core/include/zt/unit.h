// Unit: one piece of a model that the ZeRO engine runs, shards and gathers as a whole
// (an embedding, one transformer block, a head), in the spirit of a Zero3Sequential. C++
// modules have no forward hooks, so the engine calls units itself, in order: the output of unit
// i is the input of unit i+1.
// A unit lists the parameters it uses. A tensor listed by two units (GPT's token embedding and
// its tied LM head) is owned by the first and borrowed by the other: the engine keeps it
// gathered while either needs it and reduces its gradient once.
// The engine takes over the parameters' storage: when it is built it re-points each parameter
// into a flat buffer of its group (set_data, so the tensor objects stay the same), and at stage
// 3 it frees that buffer between uses and gathers it again before forward and backward. So a
// unit must keep using the very tensors parameters() returned, must not replace them or cache
// their data pointers, and must not read them outside forward() (and its backward).
// Thread safety: units are used from the training thread only.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zt/api.h"

namespace zt {

class ZT_API Unit {
 public:
  virtual ~Unit();
  // A name for messages and plans ("block3"). Never throws.
  virtual std::string name() const = 0;
  // Runs the unit under autograd.
  //   input: in, the previous unit's output (the batch for the first unit).
  //   returns: the input of the next unit (the model's output for the last one).
  // Its parameters are gathered when it is called. With activation checkpointing the engine
  // runs it a second time in backward with the same input, so it must be deterministic apart
  // from the RNG state the engine restores. Throws what LibTorch throws (c10::Error).
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  // (name, tensor) of every parameter forward() uses, owned or borrowed, in a fixed order.
  //   returns: the same tensors in the same order on every call (the engine calls it once to
  //            register, and again for activation checkpointing); each requires grad.
  // Names are the ones plans (TensorMeta::name) and messages use. Units a ModelSource builds
  // borrow by name: a tensor borrowed from an earlier unit is listed (and declared) under its
  // owner's name, and the same tensor under a name of its own is refused (InternalError). Units
  // handed to the engine built (a TorchScript module's) are matched by identity, whatever the
  // name. A tensor that does not require grad makes the engine's constructor throw InternalError
  // naming it.
  virtual std::vector<std::pair<std::string, at::Tensor>> parameters() = 0;
};

}  // namespace zt
