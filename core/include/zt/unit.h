// Unit: one piece of a model that the ZeRO engine runs, shards and gathers as a whole
// (an embedding, one transformer block, a head), in the spirit of a Zero3Sequential. C++
// modules have no forward hooks, so the engine calls units itself, in order: the output of unit
// i is the input of unit i+1.
// A unit lists the parameters it uses. A tensor listed by two units (GPT's token embedding and
// its tied LM head) is owned by the first and borrowed by the other: the engine keeps it
// gathered while either needs it and reduces its gradient once.
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
  virtual std::string name() const = 0;
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  // (name, tensor) of every parameter forward() uses, owned or borrowed; tensors require grad.
  virtual std::vector<std::pair<std::string, at::Tensor>> parameters() = 0;
};

}  // namespace zt
