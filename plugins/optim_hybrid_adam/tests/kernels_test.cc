// Every kernel of optim_hybrid_adam (portable, avx2, avx512: each this CPU runs, forced through
// ZT_ADAM_ISA) against the double-precision reference of adam_test_support.h: every length 0..67
// (all tails of 8 and 16 lanes, parts below the threading threshold) and one shard of 1,000,003
// elements (split across threads, an odd tail), in all three decay modes (AdamW, Adam's L2, none),
// with fp32, bf16 and fp16 gradients, with no copy-out and with a bf16 and an fp16 one. Also:
// every kernel gives the portable one's bits, a misaligned copy-out (no non-temporal stores) is
// right too, the thread count does not change a bit, and an unknown ZT_ADAM_ISA is refused.
#include <doctest/doctest.h>
#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "../../../tests/skip.h"
#include "adam_test_support.h"

namespace {

using namespace zt_adam_test;

// `steps` steps of one optimizer on a fresh shard of n elements, each checked against the
// reference (which reads the gradient widened to fp32: exactly the values the kernel sees) and,
// with a copy-out, the copy against param.to(dtype) bit for bit.
void run_case(const Hyper& h, int64_t n, int steps, torch::Dtype grad_type,
              std::optional<torch::Dtype> copy_type, WorstError& worst) {
  auto opt = make_optimizer(h.values());
  Shard s(n);
  if (copy_type) s.copy_out = torch::full({n}, 7.0, torch::dtype(*copy_type));
  const double divisor = 3.0 * 1024;
  for (int64_t step = 1; step <= steps; ++step) {
    s.grad = (torch::randn({n}) * divisor).to(grad_type);
    const torch::Tensor p0 = s.param.clone(), m0 = s.exp_avg.clone(), v0 = s.exp_avg_sq.clone();
    const double lr = scheduled_lr(h, step);
    opt->step({s.view()}, zt::StepArgs{step, lr, divisor});
    check_step_against_reference(h, step, lr, divisor, p0, s.grad.to(torch::kFloat), m0, v0, s,
                                 worst);
    if (copy_type) CHECK(torch::equal(s.copy_out, s.param.to(*copy_type)));
  }
}

// The final state of `steps` steps from seeded inputs, for bitwise comparisons.
std::vector<torch::Tensor> final_state(const std::string& isa, const Hyper& h, int64_t n,
                                       torch::Dtype grad_type, torch::Dtype copy_type) {
  IsaScope scope(isa);
  auto opt = make_optimizer(h.values());
  torch::manual_seed(static_cast<uint64_t>(n) + 100);
  Shard s(n);
  s.copy_out = torch::zeros({n}, torch::dtype(copy_type));
  for (int64_t step = 1; step <= 3; ++step) {
    s.grad = torch::randn({n}).to(grad_type);
    opt->step({s.view()}, zt::StepArgs{step, scheduled_lr(h, step), 2.0});
  }
  return {s.param, s.exp_avg, s.exp_avg_sq, s.copy_out};
}

// One kernel, every mode, gradient type and copy-out, against the double reference.
void check_kernel_against_reference(const std::string& isa) {
  IsaScope scope(isa);
  torch::manual_seed(21);
  WorstError worst;
  for (const Mode& mode : kModes) {
    Hyper h;
    h.adamw = mode.adamw;
    h.weight_decay = mode.weight_decay;
    for (torch::Dtype grad_type : kGradTypes) {
      for (const std::optional<torch::Dtype>& copy_type : kCopyTypes) {
        CAPTURE(mode.name);
        CAPTURE(grad_type);
        CAPTURE(copy_type.has_value());
        for (int64_t n = 0; n <= 67; ++n) {
          CAPTURE(n);
          run_case(h, n, 2, grad_type, copy_type, worst);
        }
        run_case(h, 1000003, 1, grad_type, copy_type, worst);
      }
    }
  }
  MESSAGE(isa << " kernel: worst error / bound: p " << worst.p << ", m " << worst.m << ", v "
              << worst.v << "; worst relative error of p where |p| >= 1e-3: " << worst.p_rel);
}

bool cpu_runs(const std::string& isa) {
  const std::vector<std::string> isas = available_isas();
  return std::find(isas.begin(), isas.end(), isa) != isas.end();
}

}  // namespace

// One case per kernel, so a kernel this CPU cannot run reads Skipped, not Passed.
TEST_CASE("the portable kernel: every mode, gradient type and copy-out vs the double reference") {
  check_kernel_against_reference("portable");
}

TEST_CASE("the avx2 kernel: every mode, gradient type and copy-out vs the double reference") {
  if (!cpu_runs("avx2")) ZT_SKIP("this CPU lacks AVX2, FMA or F16C: the avx2 kernel cannot run");
  check_kernel_against_reference("avx2");
}

TEST_CASE("the avx512 kernel: every mode, gradient type and copy-out vs the double reference") {
  if (!cpu_runs("avx512")) ZT_SKIP("this CPU lacks AVX-512F or BW: the avx512 kernel cannot run");
  check_kernel_against_reference("avx512");
}

TEST_CASE("every kernel gives the same bits, tails included") {
  const std::vector<std::string> isas = available_isas();
  if (isas.size() < 2)
    ZT_SKIP("this CPU runs only the portable kernel: nothing to compare it with");
  for (const Mode& mode : kModes) {
    Hyper h;
    h.adamw = mode.adamw;
    h.weight_decay = mode.weight_decay;
    for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 67, 100003}) {
      for (torch::Dtype grad_type : {torch::kFloat, torch::kHalf}) {
        const auto portable = final_state("portable", h, n, grad_type, torch::kBFloat16);
        for (size_t k = 1; k < isas.size(); ++k) {
          CAPTURE(mode.name);
          CAPTURE(n);
          CAPTURE(grad_type);
          CAPTURE(isas[k]);
          CHECK(same_bits(portable, final_state(isas[k], h, n, grad_type, torch::kBFloat16)));
        }
      }
    }
  }
}

TEST_CASE("a copy-out too misaligned for non-temporal stores is written all the same") {
  // The SIMD kernels stream the 16-bit copy where it is aligned to a vector's worth of it and
  // store it plainly otherwise; a view 1 element into its storage is never so aligned.
  torch::manual_seed(22);
  for (const std::string& isa : available_isas()) {
    IsaScope scope(isa);
    auto opt = make_optimizer(Hyper{}.values());
    for (torch::Dtype copy_type : {torch::kBFloat16, torch::kHalf}) {
      for (int64_t n : {5, 1000, 300007}) {
        CAPTURE(isa);
        CAPTURE(copy_type);
        CAPTURE(n);
        Shard s(n);
        const torch::Tensor storage = torch::zeros({n + 1}, torch::dtype(copy_type));
        s.copy_out = storage.slice(0, 1, n + 1);
        opt->step({s.view()}, zt::StepArgs{1, 1e-2, 1.0});
        CHECK(torch::equal(s.copy_out, s.param.to(copy_type)));
        CHECK(storage[0].item<float>() == 0);
      }
    }
  }
}

TEST_CASE("the thread count does not change a bit") {
  const int threads = at::get_num_threads();
  Hyper h;
  h.adamw = false;
  for (const std::string& isa : available_isas()) {
    CAPTURE(isa);
    at::set_num_threads(1);
    const auto one = final_state(isa, h, 1000003, torch::kFloat, torch::kHalf);
    at::set_num_threads(3);  // more threads than cores still splits the same elements
    const auto three = final_state(isa, h, 1000003, torch::kFloat, torch::kHalf);
    CHECK(same_bits(one, three));
  }
  at::set_num_threads(threads);
}

TEST_CASE("ZT_ADAM_ISA: an unknown kernel is a ConfigError naming the variable") {
  IsaScope scope("sse9");
  CHECK_THROWS_WITH_AS(make_optimizer({}), doctest::Contains("ZT_ADAM_ISA=sse9"), zt::ConfigError);
}
