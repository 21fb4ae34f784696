// optim_hybrid_adam: the Adam / AdamW optimizer plugin. Updates the engine's flat master shards
// in place with LibTorch 1.13's torch::optim::AdamW (adamw = true) or torch::optim::Adam
// (adamw = false) arithmetic, and writes the optional bf16/fp16 copy of the new parameters in
// the same pass over memory. To save memory and offload traffic, the moments (state_dtype) and
// the masters themselves (master_dtype) may be kept in bf16: computed in fp32 and rounded when
// stored, to nearest or stochastically (state_rounding, master_rounding; stochastic by default
// for masters, whose small updates rounding to nearest would lose). Each shard is updated where
// it lives: host shards by the SIMD kernel on the CPU, CUDA shards by the multi-tensor CUDA kernel
// on the current CUDA stream. This file owns options, checks and that split; adam_kernel.{h,cc} the
// math and the host threads, adam_isa.{h,cc} the choice of SIMD kernel (once, at create()),
// adam_cuda.{h,cu} the CUDA kernel (built only with a CUDA toolkit and a CUDA-enabled LibTorch:
// ZT_WITH_CUDA).
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include "adam_isa.h"
#include "adam_kernel.h"
#include "zt/error.h"
#include "zt/optimizer.h"
#include "zt/options.h"
#include "zt/tensor_checks.h"

#if ZT_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "adam_cuda.h"
#endif

namespace {

using zt::hybrid_adam::AdamBuffers;
using zt::hybrid_adam::AdamConstants;
using zt::hybrid_adam::ElemType;

constexpr const char* kId = "optim_hybrid_adam";

struct HybridAdamConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool adamw = true;
  c10::ScalarType state_dtype = c10::ScalarType::Float;
  zt::hybrid_adam::StateRounding state_rounding = zt::hybrid_adam::StateRounding::kNearest;
  c10::ScalarType master_dtype = c10::ScalarType::Float;
  zt::hybrid_adam::StateRounding master_rounding = zt::hybrid_adam::StateRounding::kStochastic;
};

std::optional<ElemType> elem_type(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return ElemType::kFloat32;
    case c10::ScalarType::BFloat16: return ElemType::kBFloat16;
    case c10::ScalarType::Half: return ElemType::kFloat16;
    default: return std::nullopt;
  }
}

// Every message names the shard and the tensor, since the engine hands over many at once:
// "optim_hybrid_adam: shard 3: grad ...".
std::string subject(size_t shard, const char* role) {
  return std::string(kId) + ": shard " + std::to_string(shard) + ": " + role;
}

[[noreturn]] void shard_error(size_t shard, const char* role, const std::string& what) {
  throw zt::InternalError(subject(shard, role) + " " + what);
}

// Whether this build has the CUDA kernel (adam_cuda.h): only with a CUDA toolkit and a
// CUDA-enabled LibTorch, the same condition as the fingerprint's cuda=1.
#if ZT_WITH_CUDA
constexpr bool kHasCudaKernel = true;
#else
constexpr bool kHasCudaKernel = false;
#endif

// A shard is updated where its param lives: on the host or on a CUDA device. Anything else, and
// a CUDA param in a build without the CUDA kernel, is refused by name before any shard is touched.
void check_param_device(const at::Tensor& param, size_t shard) {
  const c10::Device device = param.device();
  if (device.is_cpu()) return;
  if (device.is_cuda()) {
    if (kHasCudaKernel) return;
    throw zt::PluginError(
        std::string(kId) + ": shard " + std::to_string(shard) + ": param is on " + device.str() +
        ", but this build of " + kId +
        " has no CUDA kernel: it was built without "
        "CUDA (plugin fingerprint cuda=0; the CUDA kernel needs both a CUDA toolkit with nvcc "
        "and a CUDA-enabled LibTorch when CMake configures zt). Rebuild zt on the GPU machine "
        "against the LibTorch inside a CUDA build of PyTorch (scripts/device-build.sh), or keep "
        "the optimizer's shards on the host (offload_optimizer)");
  }
  shard_error(shard, "param",
              "is on " + device.str() + "; " + kId + " updates CPU and CUDA shards only");
}

// A tensor the kernel may read or write through a raw pointer: defined, on the param's device,
// as long as the shard and dense.
void check_tensor(const at::Tensor& t, size_t shard, const char* role, const at::Tensor& param) {
  const std::string what = subject(shard, role);
  zt::check_defined(t, what, "the engine must allocate it");
  zt::check_device(t, what, param.device(), "param",
                   "every tensor of a shard must be on its param's device");
  zt::check_numel(t, what, param.numel(), "param",
                  "every tensor of a shard must be the same length");
  zt::check_contiguous(t, what, "hand over a dense flat view");
}

// bf16 masters are updated by the host kernels only: the CUDA kernel would need instances of its
// own for them. Refused before the build's CUDA support is looked at, since rebuilding would not
// help.
void check_master_device(const at::Tensor& param, size_t shard, const HybridAdamConfig& config) {
  // An empty shard updates nothing (a group the tier fraction left in compute memory may hold
  // no element of this rank's).
  if (!param.is_cuda() || config.master_dtype == c10::ScalarType::Float || param.numel() == 0)
    return;
  throw zt::PluginError(
      subject(shard, "param") + " is on " + param.device().str() +
      " with master_dtype = \"bf16\", but the CUDA kernel updates fp32 "
      "masters only (bf16 masters are updated on host shards): keep the "
      "optimizer on the host (offload_optimizer), or set master_dtype = \"fp32\"");
}

// Checks one shard and returns raw views of its buffers, which are on the param's device.
AdamBuffers shard_buffers(const zt::ShardTensors& s, size_t shard, const HybridAdamConfig& config) {
  zt::check_defined(s.param, subject(shard, "param"), "the engine must allocate it");
  check_master_device(s.param, shard, config);
  check_param_device(s.param, shard);
  check_tensor(s.param, shard, "param", s.param);
  zt::check_dtype(s.param, subject(shard, "param"), {config.master_dtype},
                  "param is the master copy, of master_dtype() (fp32, or bf16 with "
                  "master_dtype = \"bf16\")");

  check_tensor(s.grad, shard, "grad", s.param);
  zt::check_dtype(s.grad, subject(shard, "grad"), {at::kFloat, at::kBFloat16, at::kHalf});
  const std::optional<ElemType> grad_type = elem_type(s.grad.scalar_type());

  if (s.states.size() != 2) {
    shard_error(shard, "states",
                "holds " + std::to_string(s.states.size()) +
                    " tensors, expected 2 (exp_avg, exp_avg_sq: state_names())");
  }
  const char* state_roles[2] = {"state exp_avg", "state exp_avg_sq"};
  for (size_t k = 0; k < 2; ++k) {
    check_tensor(s.states[k], shard, state_roles[k], s.param);
    zt::check_dtype(s.states[k], subject(shard, state_roles[k]), {config.state_dtype},
                    "the engine allocates states in state_dtype()");
  }

  AdamBuffers b;
  b.numel = s.param.numel();
  b.param = s.param.data_ptr();
  b.param_type = *elem_type(config.master_dtype);
  b.param_rounding = config.master_rounding;
  b.grad = s.grad.data_ptr();
  b.grad_type = *grad_type;
  b.exp_avg = s.states[0].data_ptr();
  b.exp_avg_sq = s.states[1].data_ptr();
  b.state_type = *elem_type(config.state_dtype);
  b.state_rounding = config.state_rounding;
  b.seed = s.seed;
  if (s.copy_out.defined()) {
    if (config.master_dtype == c10::ScalarType::BFloat16) {
      shard_error(shard, "copy_out",
                  "is given with bf16 masters, which are their own 16-bit copy: the engine "
                  "passes no copy_out with master_dtype() bf16");
    }
    check_tensor(s.copy_out, shard, "copy_out", s.param);
    zt::check_dtype(s.copy_out, subject(shard, "copy_out"), {at::kBFloat16, at::kHalf},
                    "copy_out is the low-precision compute copy");
    const std::optional<ElemType> copy_type = elem_type(s.copy_out.scalar_type());
    b.copy_out = s.copy_out.data_ptr();
    b.copy_type = *copy_type;
  }
  return b;
}

// The CUDA shards of one step, by device index.
using CudaShards = std::map<c10::DeviceIndex, std::vector<AdamBuffers>>;

#if ZT_WITH_CUDA
// Enqueues the CUDA shards on each device's current stream (as LibTorch's own optimizers do),
// one multi-tensor launch per argument block; the caller does not wait for them.
void update_cuda(const CudaShards& by_device, const AdamConstants& constants) {
  for (const auto& [index, buffers] : by_device) {
    const c10::cuda::CUDAGuard guard(index);
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(index);
    const zt::hybrid_adam::CudaAdamStatus status = zt::hybrid_adam::adam_update_cuda(
        buffers.data(), buffers.size(), constants, stream.stream());
    if (status.ok()) continue;
    std::string message = std::string(kId) + ": the CUDA kernel could not be launched on cuda:" +
                          std::to_string(index) + ": " + status.what;
    if (status.cuda_error == cudaErrorNoKernelImageForDevice ||
        status.cuda_error == cudaErrorInvalidDeviceFunction) {
      message += "; this build's kernel is compiled for CUDA architectures " ZT_ADAM_CUDA_ARCHS
                 ": rebuild zt with -DZT_CUDA_ARCHITECTURES=native (or this GPU's, e.g. 90)";
    }
    throw zt::PluginError(message);
  }
}
#else
void update_cuda(const CudaShards& by_device, const AdamConstants&) {
  // check_param_device refuses CUDA shards in this build, so none can reach here.
  if (!by_device.empty()) {
    throw zt::InternalError(std::string(kId) + ": CUDA shards reached a build without CUDA");
  }
}
#endif

class HybridAdam final : public zt::Optimizer {
 public:
  HybridAdam(const HybridAdamConfig& config, zt::hybrid_adam::AdamRangeKernel kernel)
      : config_(config), kernel_(kernel) {}

  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }

  c10::ScalarType state_dtype() const override { return config_.state_dtype; }

  c10::ScalarType master_dtype() const override { return config_.master_dtype; }

  double base_lr() const override { return config_.lr; }

  void step(const std::vector<zt::ShardTensors>& shards, const zt::StepArgs& args) override {
    if (args.step < 1) {
      throw zt::InternalError(std::string(kId) + ": step count " + std::to_string(args.step) +
                              " is not 1-based; the first update is step 1");
    }
    if (!std::isfinite(args.lr) || args.lr < 0) {
      throw zt::InternalError(std::string(kId) + ": learning rate " + std::to_string(args.lr) +
                              " for step " + std::to_string(args.step) +
                              " must be finite and >= 0; check the lr schedule");
    }
    if (!std::isfinite(args.grad_divisor) || args.grad_divisor <= 0) {
      throw zt::InternalError(std::string(kId) + ": grad_divisor " +
                              std::to_string(args.grad_divisor) + " must be finite and > 0");
    }
    // Every shard is checked before any is touched, so a bad call never leaves half a step.
    // Host shards go to the SIMD kernel, CUDA shards to the CUDA kernel of their device.
    // [1]: the shards that take weight decay, [0]: those exempt from it (their constants are
    // those of weight_decay = 0, as a torch.optim parameter group without decay).
    std::vector<AdamBuffers> host[2];
    CudaShards cuda[2];
    for (size_t i = 0; i < shards.size(); ++i) {
      const AdamBuffers b = shard_buffers(shards[i], i, config_);
      const int decays = shards[i].weight_decay ? 1 : 0;
      if (shards[i].param.is_cuda()) {
        cuda[decays][shards[i].param.device().index()].push_back(b);
      } else {
        host[decays].push_back(b);
      }
    }

    AdamConstants constants[2];
    for (int decays = 0; decays < 2; ++decays) {
      constants[decays] = zt::hybrid_adam::make_adam_constants(
          args.lr, config_.beta1, config_.beta2, config_.eps, decays ? config_.weight_decay : 0.0,
          config_.adamw, args.step, args.grad_divisor);
    }
    // The GPU work is only enqueued, so it runs while the host loop below updates host shards.
    for (int decays = 0; decays < 2; ++decays) update_cuda(cuda[decays], constants[decays]);
    for (int decays = 0; decays < 2; ++decays) {
      for (const AdamBuffers& b : host[decays]) {
        if (b.numel > 0) zt::hybrid_adam::adam_update_cpu(b, constants[decays], kernel_);
      }
    }
  }

 private:
  HybridAdamConfig config_;
  zt::hybrid_adam::AdamRangeKernel kernel_;  // chosen once for this CPU (adam_isa.h)
};

[[noreturn]] void option_error(const zt::Options& options, const std::string& key,
                               const std::string& what) {
  throw zt::ConfigError(options.where(key).str() + ": " + options.table() + "." + key + " = " +
                        zt::value_to_toml(options.get(key)) + " " + what);
}

// One of a string option's two values: a value the config loader's choice check did not see
// (an Options built by hand) must not silently pick the other storage.
bool is_second_choice(const zt::Options& options, const std::string& key, const char* first,
                      const char* second) {
  const std::string& value = options.get_string(key);
  if (value != first && value != second) {
    option_error(options, key, std::string("must be \"") + first + "\" or \"" + second + "\"");
  }
  return value == second;
}

// How one kind of array is stored: fp32, or bf16 rounded one way or the other.
struct Storage {
  c10::ScalarType dtype;
  zt::hybrid_adam::StateRounding rounding;
};

// The pair of options `<dtype_key>` ("fp32" or "bf16") and `<rounding_key>` ("nearest" or
// "stochastic") that says how `what` is stored. With `refuse_unused`, the rounding that is not
// the key's default contradicts fp32 storage: a default may be written out whole (a config
// printed with --print-config, the arms live A/B writes) and must load as it was.
Storage read_storage(const zt::Options& options, const std::string& dtype_key,
                     const std::string& rounding_key, const char* default_rounding,
                     const std::string& what, bool refuse_unused) {
  const bool stochastic_default = std::string(default_rounding) == "stochastic";
  const bool other_rounding = is_second_choice(options, rounding_key, default_rounding,
                                               stochastic_default ? "nearest" : "stochastic");
  const Storage s{is_second_choice(options, dtype_key, "fp32", "bf16") ? c10::ScalarType::BFloat16
                                                                       : c10::ScalarType::Float,
                  stochastic_default == other_rounding
                      ? zt::hybrid_adam::StateRounding::kNearest
                      : zt::hybrid_adam::StateRounding::kStochastic};
  if (refuse_unused && other_rounding && s.dtype == c10::ScalarType::Float) {
    option_error(options, rounding_key,
                 "rounds bf16 " + what + " only, but " + dtype_key +
                     " = \"fp32\" keeps them exact: set " + dtype_key + " = \"bf16\" or drop " +
                     rounding_key);
  }
  return s;
}

class HybridAdamPlugin final : public zt::OptimizerPlugin {
 public:
  std::vector<zt::OptionSpec> options() const override {
    return {
        zt::opt_double("lr", 1e-3,
                       "learning rate (> 0) before the engine's schedule scales it: "
                       "larger learns faster but may diverge",
                       0.0),
        zt::opt_double_list("betas", {0.9, 0.999},
                            "[beta1, beta2], each in [0, 1): decay of the "
                            "gradient and squared-gradient averages; closer to 1 averages over "
                            "more steps (smoother, slower to react; LLMs often use beta2 = 0.95)"),
        zt::opt_double("eps", 1e-8,
                       "added to sqrt(v) (> 0): larger damps steps where gradients "
                       "are tiny and makes updates more SGD-like, smaller is closer to pure "
                       "Adam",
                       0.0),
        zt::opt_double("weight_decay", 0.0,
                       "pull of weights toward zero each step: regularises, "
                       "too much underfits; 0 disables",
                       0.0),
        zt::opt_bool("adamw", true,
                     "true: decoupled decay p *= 1 - lr*wd (torch::optim::AdamW); "
                     "false: L2 term wd*p added to the gradient (torch::optim::Adam), which "
                     "Adam's scaling weakens for weights with large gradients"),
        zt::opt_string("state_dtype", "fp32",
                       "storage of exp_avg and exp_avg_sq in memory, offload tiers and their "
                       "traffic: fp32 (8 B/param), or bf16 (4 B/param; the update still computes "
                       "in fp32, and rounds each moment once when it stores it)",
                       {"fp32", "bf16"}),
        zt::opt_string("state_rounding", "stochastic",
                       "how bf16 moments are rounded: stochastic (up with the probability of the "
                       "dropped fraction: unbiased, so the small updates of a large moment are "
                       "not all lost; deterministic per element and step), or nearest (even: "
                       "exp_avg_sq's change of (1 - beta2) = 0.1% a step is under half a bf16 "
                       "spacing, so it can never decay); fp32 states ignore it",
                       {"stochastic", "nearest"}),
        zt::opt_string("master_dtype", "fp32",
                       "storage of the master parameters in memory, offload tiers and their "
                       "traffic: fp32 (4 B/param), or bf16 (2 B/param; the update still computes "
                       "in fp32 and rounds each parameter once when it stores it, so updates "
                       "below a bf16 spacing survive only on average: see master_rounding)",
                       {"fp32", "bf16"}),
        zt::opt_string("master_rounding", "stochastic",
                       "how bf16 masters are rounded: stochastic (up with the probability of the "
                       "dropped fraction: unbiased, so updates smaller than half a bf16 spacing "
                       "still move the weights on average) or nearest (even: such updates are "
                       "lost and training stalls once they are all that small); only with "
                       "master_dtype = \"bf16\"",
                       {"stochastic", "nearest"}),
    };
  }

  std::unique_ptr<zt::Optimizer> create(const zt::Options& options) const override {
    // The config loader checks types and inclusive ranges; what it cannot express (lr, eps
    // strictly positive, the betas' count and range) is checked here, before any step.
    HybridAdamConfig c;
    c.lr = options.get_double("lr");
    // The kernels compute in fp32: an lr past float's range was an infinite step.
    if (!(std::isfinite(c.lr) && c.lr > 0 && c.lr <= std::numeric_limits<float>::max())) {
      option_error(options, "lr", "must be a finite number > 0 (e.g. lr = 3e-4)");
    }
    const std::vector<double>& betas = options.get_double_list("betas");
    if (betas.size() != 2) {
      option_error(options, "betas",
                   "must hold exactly two numbers [beta1, beta2] "
                   "(e.g. betas = [0.9, 0.999])");
    }
    for (double b : betas) {
      if (!(b >= 0 && b < 1)) {
        option_error(options, "betas",
                     "must have each beta in [0, 1): a beta of 1 or more "
                     "never forgets, a negative one oscillates "
                     "(e.g. betas = [0.9, 0.999])");
      }
    }
    c.beta1 = betas[0];
    c.beta2 = betas[1];
    c.eps = options.get_double("eps");
    // In fp32, as the kernels use it: below float's smallest normal number it is 0 or a
    // denormal the SIMD kernels may flush to 0, and a moment still 0 divides 0 by 0.
    if (!(std::isfinite(c.eps) && c.eps >= std::numeric_limits<float>::min() &&
          c.eps <= std::numeric_limits<float>::max())) {
      option_error(options, "eps",
                   "must be a finite number from 1.2e-38 (fp32's smallest normal number, as "
                   "the update computes in fp32) to 3.4e38; it keeps the update's "
                   "denominator away from zero (e.g. eps = 1e-8)");
    }
    c.weight_decay = options.get_double("weight_decay");
    // In fp32, as the update computes: 1e39 was finite in double and an infinite decay (every
    // parameter inf or NaN at step 1).
    if (!(std::isfinite(c.weight_decay) && c.weight_decay >= 0 &&
          c.weight_decay <= std::numeric_limits<float>::max() &&
          c.lr * c.weight_decay <= std::numeric_limits<float>::max())) {
      option_error(options, "weight_decay",
                   "must be a finite number >= 0 (0 disables it) whose product with lr is "
                   "below 3.4e38 (fp32's largest number, as the update computes in fp32)");
    }
    c.adamw = options.get_bool("adamw");
    // Stochastic by default for moments too: to nearest, exp_avg_sq's per-step change with the
    // usual beta2 is under half a spacing and is lost, so it never decays after a large
    // gradient. Either rounding loads with fp32 states: the default was nearest before, and
    // configs printed then (a checkpoint's) say so.
    const Storage states = read_storage(options, "state_dtype", "state_rounding", "stochastic",
                                        "moments", /*refuse_unused=*/false);
    c.state_dtype = states.dtype;
    c.state_rounding = states.rounding;
    // Stochastic by default for masters: to nearest, updates under half a spacing are lost.
    const Storage masters = read_storage(options, "master_dtype", "master_rounding", "stochastic",
                                         "master weights", /*refuse_unused=*/true);
    c.master_dtype = masters.dtype;
    c.master_rounding = masters.rounding;
    const zt::hybrid_adam::Isa isa = zt::hybrid_adam::choose_isa();
    return std::make_unique<HybridAdam>(c, zt::hybrid_adam::range_kernel(isa));
  }
};

}  // namespace

ZT_PLUGIN(ZT_KIND_OPTIMIZER, "optim_hybrid_adam", "0.1.0",
          "Adam / AdamW on flat master shards (LibTorch semantics), fp32 or bf16 masters and "
          "moments, optional bf16/fp16 copy-out; host shards on the CPU (SIMD), CUDA shards "
          "(fp32 masters) on the GPU (CUDA builds)",
          HybridAdamPlugin)
