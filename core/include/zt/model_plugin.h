// Model plugins: a model shipped as a shared object, like every other part. The plugin's factory
// makes a TrainableModel: the units the engine runs, shards and gathers (a ModelSource: every
// parameter declared first, then units built one at a time, so partitioned construction works),
// the loss the trainer computes on the last unit's output, and what the model takes as input, so
// the trainer can pick and check a data source for it.
// The trainer's TorchScript models (model.kind = "torchscript") implement the same interface.
// Thread safety: a TrainableModel is used from the training thread only. The factory
// (ModelPlugin) follows plugin.h: const methods, any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zt/api.h"
#include "zt/model_source.h"
#include "zt/options.h"
#include "zt/plugin.h"

namespace zt {

// What one sample of the model's input and target is, so the trainer can feed it. Two shapes of
// data exist:
//   tokens:  int64 token ids [B, seq_len] in, the same shifted by one as target (text, tokens
//            and synthetic data sources); vocab bounds the ids.
//   vectors: fp32 input [B, input_shape...] and target [B, target_shape...], N(0, 1) (the
//            synthetic source).
struct ModelInputs {
  bool tokens = true;
  int64_t seq_len = 0;                // tokens: > 0
  int64_t vocab = 0;                  // tokens: > 0
  std::vector<int64_t> input_shape;   // vectors: one sample's input shape, each size > 0
  std::vector<int64_t> target_shape;  // vectors: one sample's target shape, each size > 0
};

class ZT_API TrainableModel : public ModelSource {
 public:
  // The data the model takes. Never throws; the same value on every call.
  virtual ModelInputs inputs() const = 0;
  // The loss of one micro batch, a scalar the engine runs backward from.
  //   output: in, the last unit's output for the micro batch.
  //   target: in, the micro batch's target (as inputs() describes it), on the CPU.
  // Compute it in fp32 whatever the compute dtype, so low-precision runs compare with the fp32
  // reference on the same footing. Throws what LibTorch throws.
  virtual at::Tensor loss(const at::Tensor& output, const at::Tensor& target) = 0;
  // One line for the run header: what the model is, its units and parameters. Never throws.
  virtual std::string describe() const = 0;
  // Tensors the units use that are not parameters (running statistics, masks), by name: the
  // trainer broadcasts them from rank 0 before step 1, so every rank starts from the same
  // values. Default: none.
  virtual std::vector<std::pair<std::string, at::Tensor>> buffers();
  // Training (true) or inference (false) behaviour of the units, as nn.Module::train/eval:
  // dropout off and running statistics read, not updated, while false. The trainer sets false
  // around evaluation and sampling, whose results must not depend on random masks (they would
  // differ between world sizes, which split the samples differently), and true again after;
  // a model starts in training. Default: nothing (units that behave the same either way).
  virtual void set_training(bool training);
};

// The factory a ZT_KIND_MODEL plugin exports (see plugin.h for ZT_PLUGIN). The job selects it
// with model.kind = "plugin" and plugins.model = "<id>"; its options come from [plugin.<id>].
class ZT_API ModelPlugin : public Plugin {
 public:
  // Makes the model.
  //   options: in, the validated [plugin.<id>] table (every declared key present).
  //   seed:    in, run.seed: what every declared initialiser must depend on (with the
  //            parameter's name and element index, zt/param_init.h), so all ranks and the
  //            single-process reference start from the same values.
  //   returns: the model, never null. Allocates no parameter (build() does, unit by unit).
  // Throws ConfigError naming plugin.<id>.<key> for values its declared ranges cannot express.
  virtual std::unique_ptr<TrainableModel> create(const Options& options, uint64_t seed) const = 0;
};

}  // namespace zt
