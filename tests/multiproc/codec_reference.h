// The engine oracle's reference for codecs (zt_engine_check --codec_weights / --codec_gradients):
// one step of ZeRO++ computed in this one process with the codec itself, from the engine's own
// exact weights, so the comparison is step by step and no rounding of earlier steps can move a
// code. For shard_tensor's layout (each tensor its own group, padded to a multiple of the shard
// group's k ranks: the world, or MiCS's groups of k consecutive ranks):
//   weights    each group member's chunk of the padded tensor through decode(encode(.)), what
//              stage 3's coded gather (flat or two-level) gives every rank to compute with;
//   gradients  each rank's own gradient at those weights (its micro-batch), plus its residual
//              with error feedback; chunk d of member m's goes through decode(encode(.)) unless
//              m == d; within each group the chunks are summed in member order from zero, the
//              groups' sums added exactly (MiCS's all-reduce across them) or, with a codec
//              across, in its two coded hops: each group's shard cut into one chunk per group,
//              sent through decode(encode(.)) to the chunk's group unless it is its own, summed
//              in group order, and every chunk's sum through decode(encode(.)) once more; the
//              total averaged over the world; each rank's residuals become what encoding lost.
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
  // Any codec may be null (exact). `world` ranks are simulated, in shard groups of `shard_size`
  // consecutive ranks (the world for flat ZeRO); `across` codes MiCS's all-reduce across them.
  CodecReference(const Codec* weights, const Codec* gradients, const Codec* across,
                 bool error_feedback, int world, int shard_size);

  // One step's gradients.
  //   params:    in/out, the reference model's leaf tensors, in the engine's parameter order;
  //              on return they hold `exact` and their .grad the coded, averaged gradient.
  //   exact:     in, the engine's weights now (Engine::full_parameters), the same order.
  //   rank_loss: runs the reference model on rank q's samples and returns its loss.
  void gradients(const NamedTensors& params, const NamedTensors& exact,
                 const std::function<at::Tensor(int q)>& rank_loss);
  // A skipped step (the loss scaler saw an overflow): its gradients are dropped, and so is what
  // encoding lost of them, as the engine does.
  void forget_residuals();

 private:
  at::Tensor coded_weight(const at::Tensor& w) const;
  at::Tensor coded_average(const std::string& name, const std::vector<at::Tensor>& grads);
  // MiCS's coded all-reduce of member m's shard over the groups' sums (each `c` long).
  at::Tensor coded_across(const std::string& name, int m, const std::vector<at::Tensor>& sums,
                          int64_t c);
  int64_t padded(int64_t numel) const { return (numel + k_ - 1) / k_ * k_; }

  const Codec* weights_;
  const Codec* gradients_;
  const Codec* across_;
  bool error_feedback_;
  int world_;
  int k_;                                                     // ranks per shard group
  std::map<std::string, std::vector<at::Tensor>> residuals_;  // per tensor, per rank (padded)
  std::map<std::string, std::vector<at::Tensor>> across_residuals_;  // per tensor, per rank
};

}  // namespace zt::test
