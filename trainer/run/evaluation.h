// [eval]'s evaluation, shared by validation while training and `trainer eval`: every rank
// evaluates its share of the same fixed validation samples through Engine::forward_eval (no
// autograd; stage 3 gathers as forward does), and the per-sample losses are summed over ranks.
// Thread safety: the training thread only; collective.
#pragma once

#include <cstdint>
#include <functional>

#include "data/data_source.h"
#include "models/model.h"
#include "report/train_report.h"
#include "settings/job_settings.h"
#include "zt/communicator.h"
#include "zt/host/engine.h"

namespace zt::trainer {

// A model's own forward, for a TorchScript module whose units are not a chain
// (models::check_first_batch); empty: the engine runs the units.
using OwnForward = std::function<at::Tensor(const at::Tensor&)>;

// The model's units in inference behaviour (TrainableModel::set_training(false): dropout off)
// while it lives, in training behaviour again after; for the built-in models, which have no
// dropout, nothing. Evaluation and sampling run inside one.
class InferenceScope {
 public:
  explicit InferenceScope(const models::ModelShape& shape);
  ~InferenceScope();
  InferenceScope(const InferenceScope&) = delete;
  InferenceScope& operator=(const InferenceScope&) = delete;

 private:
  TrainableModel* model_;
};

// `input` through the model without autograd: Engine::forward_eval, or with `own` the engine's
// driven forward around the model's own. Collective at stage 3 (every rank calls it alike).
at::Tensor forward_without_grad(Engine& engine, const OwnForward& own, const at::Tensor& input);

// A batch's input as the engine takes it: on the engine's device, a floating input in its
// compute dtype (token ids stay integers).
at::Tensor engine_input(const at::Tensor& input, const EngineOptions& options);

// One training micro step: forward, `loss_fn` on the output, backward; the loss, detached and
// unread (Engine::forward_backward, or with `own` the driven forward around the model's own).
at::Tensor train_micro_step(Engine& engine, const OwnForward& own, const at::Tensor& input,
                            const std::function<at::Tensor(const at::Tensor&)>& loss_fn);

// The eval.batches x eval.micro_batch validation samples of `val`: rank r takes samples r,
// r + world, ... in as many forward passes as every other rank (a short last batch is padded with
// sample 0, which is left out); each sample's loss (model.loss over that sample alone) is summed
// in double over all ranks and divided by the sample count, so the number is the same at every
// world size. `options` places the input (engine_input); `step` labels the result.
// `before_pass(p, passes)`, when given, runs before each forward pass on every rank (`trainer
// eval` stops there on a signal; it may throw).
EvalEvent evaluate(Engine& engine, const OwnForward& own, Communicator& comm,
                   const models::Model& model, const data::DataSource& val,
                   const EvalSettings& settings, int rank, int world, const EngineOptions& options,
                   int64_t step,
                   const std::function<void(int64_t pass, int64_t passes)>& before_pass = {});

}  // namespace zt::trainer
