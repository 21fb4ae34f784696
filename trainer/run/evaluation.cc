#include "run/evaluation.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <chrono>
#include <vector>

#include "zt/host/trace.h"

namespace zt::trainer {

InferenceScope::InferenceScope(const models::ModelShape& shape) : model_(shape.custom.get()) {
  if (model_ != nullptr) model_->set_training(false);
}

InferenceScope::~InferenceScope() {
  if (model_ != nullptr) model_->set_training(true);
}

at::Tensor forward_without_grad(Engine& engine, const OwnForward& own, const at::Tensor& input) {
  if (!own) return engine.forward_eval(input);
  const c10::NoGradGuard no_grad;
  engine.begin_forward(false);
  at::Tensor out;
  try {
    out = own(input);
  } catch (...) {
    engine.abort_forward();
    throw;
  }
  engine.end_forward();
  return out;
}

at::Tensor engine_input(const at::Tensor& input, const EngineOptions& options) {
  if (input.is_floating_point()) return input.to(options.device, options.compute_dtype);
  return input.to(options.device);
}

at::Tensor train_micro_step(Engine& engine, const OwnForward& own, const at::Tensor& input,
                            const std::function<at::Tensor(const at::Tensor&)>& loss_fn) {
  if (!own) return engine.forward_backward(input, loss_fn);
  engine.begin_forward(true);
  at::Tensor loss;
  try {
    loss = loss_fn(own(input));
  } catch (...) {
    engine.abort_forward();
    throw;
  }
  return engine.backward(loss);
}

EvalEvent evaluate(Engine& engine, const OwnForward& own, Communicator& comm,
                   const models::Model& model, const data::DataSource& val,
                   const EvalSettings& settings, int rank, int world, const EngineOptions& options,
                   int64_t step,
                   const std::function<void(int64_t pass, int64_t passes)>& before_pass) {
  const auto t0 = std::chrono::steady_clock::now();
  const trace::Scope span("evaluation", trace::kStep);
  const InferenceScope inference(model.shape);
  const int64_t total = settings.batches * settings.micro_batch;
  const int64_t per_rank = (total + world - 1) / world;
  const int64_t passes = (per_rank + settings.micro_batch - 1) / settings.micro_batch;
  // Summed in double where the losses are, read once: no host sync per sample on a GPU.
  const at::Tensor sum = at::zeros({1}, at::TensorOptions(at::kDouble).device(options.device));
  for (int64_t p = 0; p < passes; ++p) {
    if (before_pass) before_pass(p, passes);
    std::vector<at::Tensor> inputs, targets;
    int64_t real = 0;
    for (int64_t k = p * settings.micro_batch; k < (p + 1) * settings.micro_batch; ++k) {
      const int64_t sample = rank + world * k;
      const bool pad = sample >= total;
      data::Batch b = val.get_samples(pad ? 0 : sample, 1);
      inputs.push_back(b.input);
      targets.push_back(b.target);
      if (!pad) ++real;
    }
    const at::Tensor input = engine_input(at::cat(inputs), options);
    const at::Tensor target = at::cat(targets).to(options.device);
    const at::Tensor out = forward_without_grad(engine, own, input);
    // A loss that uses parameters would otherwise chain the sum into a graph of every pass.
    const c10::NoGradGuard no_grad;
    for (int64_t i = 0; i < real; ++i) {
      const at::Tensor loss = model.loss(out.narrow(0, i, 1), target.narrow(0, i, 1));
      sum.add_(loss.detach().to(sum.device(), at::kDouble).reshape({1}));
    }
  }
  const at::Tensor all = sum.to(at::kCPU);
  all_reduce_host(comm, all, ReduceOp::kSum);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {step, all.item<double>() / static_cast<double>(total), total, seconds,
          models::model_inputs(model.shape).tokens};
}

}  // namespace zt::trainer
