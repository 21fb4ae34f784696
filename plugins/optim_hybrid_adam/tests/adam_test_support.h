// Shared by optim_hybrid_adam's tests: the plugin loaded through the catalog as the engine loads
// it, a shard as the engine hands it over, the double-precision reference of one step with its
// error bound, ZT_ADAM_ISA scoping to force each kernel (portable, avx2, avx512), bitwise
// comparison of runs and host memory labelled as a CUDA device.
// Include after <torch/torch.h> and <doctest/doctest.h> (with glog's CHECK dropped in between).
#pragma once

#include <stdlib.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zt/error.h"
#include "zt/host/plugin_loader.h"
#include "zt/optimizer.h"
#include "zt/options.h"

namespace zt_adam_test {

inline const zt::OptimizerPlugin& plugin() {
  static zt::PluginCatalog catalog;
  return catalog.optimizer("optim_hybrid_adam");
}

inline std::unique_ptr<zt::Optimizer> make_optimizer(std::map<std::string, zt::Value> values) {
  const zt::OptimizerPlugin& p = plugin();
  return p.create(zt::Options("plugin.optim_hybrid_adam", p.options(), std::move(values), {}));
}

struct Hyper {
  double lr = 1e-2;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.05;
  bool adamw = true;

  std::map<std::string, zt::Value> values() const {
    return {{"lr", lr},
            {"betas", std::vector<double>{beta1, beta2}},
            {"eps", eps},
            {"weight_decay", weight_decay},
            {"adamw", adamw}};
  }
};

// A shard as the engine hands it over: fp32 master params, a gradient, zeroed states.
struct Shard {
  torch::Tensor param, grad, exp_avg, exp_avg_sq, copy_out;

  explicit Shard(int64_t n)
      : param(torch::randn({n})),
        grad(torch::randn({n})),
        exp_avg(torch::zeros({n})),
        exp_avg_sq(torch::zeros({n})) {}
  zt::ShardTensors view() const { return {param, grad, {exp_avg, exp_avg_sq}, copy_out}; }
};

// The lr the engine's schedule hands over at `step`: changing each step, so a kernel that used
// the configured lr instead of StepArgs::lr would be caught.
inline double scheduled_lr(const Hyper& h, int64_t step) {
  return h.lr * (1.0 - 0.04 * (step - 1));
}

// The fp32 kernel against exact (double) arithmetic on the same fp32 inputs, one step at a time.
// Bound: a first-order error propagation through Adam's formula in which every operation may be
// off by kEps = 1e-6 relative to the magnitudes it combines (about 17 fp32 ulps; a correct fp32
// kernel needs 1-3 per op):
//   m, v: |x - r| <= kEps * S, S = the sum of the magnitudes of the terms that produced r
//         (m: b1|m| + (1-b1)(|g| + wd|p|); v: b2 v + (1-b2)(|g| + wd|p|)^2);
//   p:    |x - r| <= kEps |p| + e_U, e_U = the error of the update s*m/D (s = lr/bc1,
//         D = sqrt(v)/sqrt(bc2) + eps) that the m and v errors above imply, plus kEps |U|.
// So where nothing cancels this is a relative bound of 1e-6; where g + wd*p or the m average
// cancels, or eps and sqrt(v) are of a size, it widens exactly as fp32 rounding of the inputs
// must (LibTorch's own fp32 result moves by as much there). The MESSAGE lines give the worst
// error seen as a fraction of this bound (under 0.5 when written).
inline constexpr double kEps = 1e-6;

struct WorstError {
  double p = 0, m = 0, v = 0;  // max |x - r| / bound seen; 1.0 = at the bound; NaN after a NaN
  double p_rel = 0;            // max |x - r| / |r| for p, where |r| >= 1e-3
};

// |x - r| / bound, with an exact zero when both are zero (a zero bound admits only equality).
// NaN when x is NaN.
inline double error_ratio(double x, double r, double bound) {
  const double err = std::abs(x - r);
  return err == 0 ? 0 : (bound == 0 ? 1e30 : err / bound);
}

// The larger of two errors, NaN when either is (std::max would drop a NaN in second place).
inline double worst_of(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}

// The elements of one step that are off their bound: a NaN anywhere counts as off.
struct StepComparison {
  int64_t failures = 0;
  std::vector<std::string> first;  // the first five, described
};

inline StepComparison compare_step_with_reference(const Hyper& h, int64_t step, double lr,
                                                  double divisor, const torch::Tensor& p0,
                                                  const torch::Tensor& g0, const torch::Tensor& m0,
                                                  const torch::Tensor& v0, const Shard& after,
                                                  WorstError& worst) {
  const int64_t n = p0.numel();
  const float* p_in = p0.data_ptr<float>();
  const float* g_in = g0.data_ptr<float>();
  const float* m_in = m0.data_ptr<float>();
  const float* v_in = v0.data_ptr<float>();
  const float* p_out = after.param.data_ptr<float>();
  const float* m_out = after.exp_avg.data_ptr<float>();
  const float* v_out = after.exp_avg_sq.data_ptr<float>();
  const double bc1 = 1 - std::pow(h.beta1, static_cast<double>(step));
  const double sqrt_bc2 = std::sqrt(1 - std::pow(h.beta2, static_cast<double>(step)));
  const double s = lr / bc1;
  StepComparison out;
  for (int64_t i = 0; i < n; ++i) {
    double p = p_in[i];
    double g = g_in[i] / divisor;
    double g_scale = std::abs(g);
    if (h.adamw) {
      p *= 1 - lr * h.weight_decay;
    } else {
      g += h.weight_decay * p;
      g_scale += h.weight_decay * std::abs(p);
    }
    const double m = h.beta1 * m_in[i] + (1 - h.beta1) * g;
    const double v = h.beta2 * v_in[i] + (1 - h.beta2) * g * g;
    const double denom = std::sqrt(v) / sqrt_bc2 + h.eps;
    const double update = s * m / denom;
    const double p_new = p - update;

    const double e_m = kEps * (h.beta1 * std::abs(m_in[i]) + (1 - h.beta1) * g_scale);
    const double e_v = kEps * (h.beta2 * v_in[i] + (1 - h.beta2) * g_scale * g_scale);
    const double e_sqrt_v = v > 0 ? std::min(e_v / (2 * std::sqrt(v)), std::sqrt(e_v))
                                  : std::sqrt(e_v);
    const double e_denom = e_sqrt_v / sqrt_bc2 + kEps * denom;
    const double e_update = s * (e_m + std::abs(m) * e_denom / denom) / denom +
                            kEps * std::abs(update);
    const double e_p = kEps * std::abs(p) + e_update;

    const double rp = error_ratio(p_out[i], p_new, e_p);
    const double rm = error_ratio(m_out[i], m, e_m);
    const double rv = error_ratio(v_out[i], v, e_v);
    worst.p = worst_of(worst.p, rp);
    worst.m = worst_of(worst.m, rm);
    worst.v = worst_of(worst.v, rv);
    if (std::abs(p_new) >= 1e-3) {
      worst.p_rel = worst_of(worst.p_rel, std::abs(p_out[i] - p_new) / std::abs(p_new));
    }
    // Written as "not within", so that a NaN is off too.
    if (!(rp <= 1 && rm <= 1 && rv <= 1) && out.failures++ < 5) {
      out.first.push_back("n=" + std::to_string(n) + " step " + std::to_string(step) + " element " +
                          std::to_string(i) + ": p " + std::to_string(p_out[i]) + " vs " +
                          std::to_string(p_new) + " (bound " + std::to_string(e_p) + "), m " +
                          std::to_string(m_out[i]) + " vs " + std::to_string(m) + ", v " +
                          std::to_string(v_out[i]) + " vs " + std::to_string(v));
    }
  }
  return out;
}

inline void check_step_against_reference(const Hyper& h, int64_t step, double lr, double divisor,
                                         const torch::Tensor& p0, const torch::Tensor& g0,
                                         const torch::Tensor& m0, const torch::Tensor& v0,
                                         const Shard& after, WorstError& worst) {
  const StepComparison c = compare_step_with_reference(h, step, lr, divisor, p0, g0, m0, v0, after,
                                                       worst);
  for (const std::string& off : c.first) FAIL_CHECK(off);
  CHECK(c.failures == 0);
}

inline void run_reference_case(const Hyper& h, int64_t n, int steps, double divisor,
                               WorstError& worst) {
  auto opt = make_optimizer(h.values());
  Shard s(n);
  for (int64_t step = 1; step <= steps; ++step) {
    s.grad = torch::randn({n});
    const torch::Tensor p0 = s.param.clone(), m0 = s.exp_avg.clone(), v0 = s.exp_avg_sq.clone();
    const double lr = scheduled_lr(h, step);
    opt->step({s.view()}, zt::StepArgs{step, lr, divisor});
    check_step_against_reference(h, step, lr, divisor, p0, s.grad, m0, v0, s, worst);
  }
}

// Sets ZT_ADAM_ISA for the optimizers created while it lives: the plugin reads it at create().
// What was set before comes back after (a caller's ZT_ADAM_ISA was dropped for later cases).
class IsaScope {
 public:
  explicit IsaScope(const std::string& isa) {
    if (const char* was = std::getenv("ZT_ADAM_ISA")) before_ = was;
    setenv("ZT_ADAM_ISA", isa.c_str(), 1);
  }
  ~IsaScope() {
    if (before_) {
      setenv("ZT_ADAM_ISA", before_->c_str(), 1);
    } else {
      unsetenv("ZT_ADAM_ISA");
    }
  }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  std::optional<std::string> before_;
};

// The kernels this CPU can run, by their ZT_ADAM_ISA names; the plugin refuses the others.
inline std::vector<std::string> available_isas() {
  std::vector<std::string> isas = {"portable"};
#if defined(__x86_64__)
  // F16C from CPUID (leaf 1, ECX bit 29), as the plugin reads it: Clang before 15 does not know
  // the name in __builtin_cpu_supports.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
    isas.push_back("avx2");
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    isas.push_back("avx512");
  }
#endif
  return isas;
}

// The modes, gradient dtypes and copy-out dtypes every kernel test sweeps.
struct Mode {
  const char* name;
  bool adamw;
  double weight_decay;
};
constexpr Mode kModes[] = {
    {"AdamW", true, 0.05}, {"Adam (L2)", false, 0.05}, {"no decay", true, 0}};
const torch::Dtype kGradTypes[] = {torch::kFloat, torch::kBFloat16, torch::kHalf};
const std::optional<torch::Dtype> kCopyTypes[] = {std::nullopt, torch::kBFloat16, torch::kHalf};

// `t`'s bits as integers of its width: torch::equal compares values, so +0 and -0 were equal
// and a NaN never equalled itself.
inline torch::Tensor bits_of(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  switch (c.element_size()) {
    case 2: return c.view(torch::kShort);
    case 4: return c.view(torch::kInt);
    case 8: return c.view(torch::kLong);
    default: return c;
  }
}

// Whether two runs' final tensors are equal bit for bit, tensor by tensor.
inline bool same_bits(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].scalar_type() != b[i].scalar_type() || !torch::equal(bits_of(a[i]), bits_of(b[i])))
      return false;
  }
  return true;
}

// `host`'s memory labelled as cuda:0 (no CUDA needed), for checks that must refuse CUDA shards
// before reading through them; `host` must outlive it.
inline torch::Tensor labelled_cuda(const torch::Tensor& host) {
  const torch::Device cuda(torch::kCUDA, 0);
  return at::for_blob(host.data_ptr(), host.sizes())
      .options(host.options().device(cuda))
      .target_device(cuda)
      .make_tensor();
}

}  // namespace zt_adam_test
