// The engine oracle's reference for codecs (zt_engine_check --codec_weights / --codec_gradients):
// one step of ZeRO++ computed in this one process with the codec itself, from the engine's own
// exact weights, so the comparison is step by step and no rounding of earlier steps can move a
// code. For shard_tensor's layout (each tensor its own group, padded to a multiple of the world):
//   weights    each rank's chunk of the padded tensor through decode(encode(.)), what stage 3's
//              coded gather gives every rank to compute with;
//   gradients  each rank's own gradient at those weights (its micro-batch), plus its residual
//              with error feedback; chunk d of rank q's goes through decode(encode(.)) unless
//              q == d; the chunks are summed in rank order from zero and averaged over the world;
//              rank q's residual becomes what encoding lost.
// Thread safety: one thread.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "zt/codec.h"

namespace zt::test {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class CodecReference {
 public:
  // Either codec may be null (exact). `world` ranks are simulated.
  CodecReference(const Codec* weights, const Codec* gradients, bool error_feedback, int world);

  // One step's gradients.
  //   params:    in/out, the reference model's leaf tensors, in the engine's parameter order;
  //              on return they hold `exact` and their .grad the coded, averaged gradient.
  //   exact:     in, the engine's weights now (Engine::full_parameters), the same order.
  //   rank_loss: runs the reference model on rank q's samples and returns its loss.
  void gradients(const NamedTensors& params, const NamedTensors& exact,
                 const std::function<at::Tensor(int q)>& rank_loss);

 private:
  at::Tensor coded_weight(const at::Tensor& w) const;
  at::Tensor coded_average(const std::string& name, const std::vector<at::Tensor>& grads);
  int64_t padded(int64_t numel) const { return (numel + world_ - 1) / world_ * world_; }

  const Codec* weights_;
  const Codec* gradients_;
  bool error_feedback_;
  int world_;
  std::map<std::string, std::vector<at::Tensor>> residuals_;  // per tensor, per rank (padded)
};

}  // namespace zt::test
