// optim_hybrid_adam with bf16 moments (state_dtype = "bf16"), on every kernel this CPU runs:
//   - to nearest, a step equals the fp32-state step on the same (widened) moments with each new
//     moment rounded once by Tensor::to(bf16), and the parameter bit for bit (the parameter
//     update reads the fp32 moments before they are stored);
//   - stochastically, each stored moment is the fp32 one's bf16 neighbour below or above, chosen
//     by the element's hash bits exactly as adam_kernel.h defines them, unbiased on average, and
//     keyed by ShardTensors::seed + index, so slicing a shard does not change a bit;
//   - every kernel gives the portable one's bits, and the thread count changes none;
//   - the default rounds stochastically, so exp_avg_sq decays (to nearest it cannot);
//   - a state tensor of the wrong dtype is refused; fp32 states take either rounding.
#include <doctest/doctest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../../../tests/skip.h"
#include "../adam_kernel.h"
#include "adam_test_support.h"

namespace {

using namespace zt_adam_test;

std::map<std::string, zt::Value> with_states(const Hyper& h, const char* dtype,
                                             const char* rounding) {
  std::map<std::string, zt::Value> v = h.values();
  v["state_dtype"] = std::string(dtype);
  v["state_rounding"] = std::string(rounding);
  return v;
}

// A shard whose moments are bf16, and a twin with the same values in fp32.
struct Bf16Shard {
  torch::Tensor param, grad, exp_avg, exp_avg_sq;
  uint64_t seed = 0;
  zt::ShardTensors view() const { return {param, grad, {exp_avg, exp_avg_sq}, {}, seed}; }
};

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Steps a bf16-state shard and an fp32 twin started from its widened moments, and checks the
// result as the file comment says, for `rounding` "nearest" or "stochastic".
void check_steps(const std::string& isa, const Hyper& h, int64_t n, torch::Dtype grad_type,
                 const char* rounding, uint64_t seed) {
  IsaScope scope(isa);
  auto bf16 = make_optimizer(with_states(h, "bf16", rounding));
  auto fp32 = make_optimizer(h.values());
  CHECK((bf16->state_dtype() == torch::kBFloat16));
  Bf16Shard s{torch::randn({n}),
              {},
              torch::zeros({n}, torch::kBFloat16),
              torch::zeros({n}, torch::kBFloat16),
              seed};
  const bool stochastic = std::string(rounding) == "stochastic";
  for (int64_t step = 1; step <= 3; ++step) {
    s.grad = (torch::randn({n}) * 4).to(grad_type);
    Shard twin(0);
    twin.param = s.param.clone();
    twin.grad = s.grad;
    twin.exp_avg = s.exp_avg.to(torch::kFloat);
    twin.exp_avg_sq = s.exp_avg_sq.to(torch::kFloat);
    const double lr = scheduled_lr(h, step);
    fp32->step({twin.view()}, zt::StepArgs{step, lr, 4.0});
    bf16->step({s.view()}, zt::StepArgs{step, lr, 4.0});
    CHECK(torch::equal(s.param, twin.param));
    if (!stochastic) {
      CHECK(torch::equal(s.exp_avg, twin.exp_avg.to(torch::kBFloat16)));
      CHECK(torch::equal(s.exp_avg_sq, twin.exp_avg_sq.to(torch::kBFloat16)));
      continue;
    }
    const uint32_t mix = zt::hybrid_adam::stochastic_mix(seed, step);
    const auto* m32 = twin.exp_avg.data_ptr<float>();
    const auto* v32 = twin.exp_avg_sq.data_ptr<float>();
    const auto* m16 = static_cast<const uint16_t*>(s.exp_avg.data_ptr());
    const auto* v16 = static_cast<const uint16_t*>(s.exp_avg_sq.data_ptr());
    int64_t off = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t r = zt::hybrid_adam::stochastic_bits(seed, mix, i);
      const uint32_t m = bits_of(m32[i]), v = bits_of(v32[i]);
      // The neighbour below (toward zero) or the one above, and exactly the one the bits pick.
      const bool m_ok = (m16[i] == (m >> 16) || m16[i] == (m >> 16) + 1) &&
                        m16[i] == ((m + (r & 0xFFFFu)) >> 16);
      const bool v_ok = (v16[i] == (v >> 16) || v16[i] == (v >> 16) + 1) &&
                        v16[i] == ((v + (r >> 16)) >> 16);
      if (!(m_ok && v_ok) && off++ < 3) {
        FAIL_CHECK("element " << i << " step " << step << ": m " << m16[i] << " from " << m32[i]
                              << ", v " << v16[i] << " from " << v32[i]);
      }
    }
    CHECK(off == 0);
  }
}

// The final bf16 state of 3 seeded steps, for bitwise comparisons.
std::vector<torch::Tensor> final_state(const std::string& isa, int64_t n, const char* rounding) {
  IsaScope scope(isa);
  auto opt = make_optimizer(with_states(Hyper{}, "bf16", rounding));
  torch::manual_seed(static_cast<uint64_t>(n) + 7);
  Bf16Shard s{torch::randn({n}),
              {},
              torch::zeros({n}, torch::kBFloat16),
              torch::zeros({n}, torch::kBFloat16),
              12345};
  for (int64_t step = 1; step <= 3; ++step) {
    s.grad = torch::randn({n}).to(torch::kBFloat16);
    opt->step({s.view()}, zt::StepArgs{step, scheduled_lr(Hyper{}, step), 2.0});
  }
  return {s.param, s.exp_avg, s.exp_avg_sq};
}

}  // namespace

TEST_CASE(
    "bf16 moments: every kernel is the fp32 step rounded once, to nearest or stochastically") {
  for (const std::string& isa : available_isas()) {
    for (const Mode& mode : kModes) {
      Hyper h;
      h.adamw = mode.adamw;
      h.weight_decay = mode.weight_decay;
      for (torch::Dtype grad_type : kGradTypes) {
        for (const char* rounding : {"nearest", "stochastic"}) {
          for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 33, 67, 200003}) {
            CAPTURE(isa);
            CAPTURE(mode.name);
            CAPTURE(grad_type);
            CAPTURE(rounding);
            CAPTURE(n);
            torch::manual_seed(static_cast<uint64_t>(n) + 31);
            check_steps(isa, h, n, grad_type, rounding, (uint64_t{3} << 40) + 977);
          }
        }
      }
    }
  }
}

TEST_CASE("bf16 moments: every kernel gives the portable kernel's bits, tails included") {
  const std::vector<std::string> isas = available_isas();
  if (isas.size() < 2)
    ZT_SKIP("this CPU runs only the portable kernel: nothing to compare it with");
  for (const char* rounding : {"nearest", "stochastic"}) {
    for (int64_t n : {1, 7, 15, 16, 17, 31, 33, 100003}) {
      const auto portable = final_state("portable", n, rounding);
      for (size_t k = 1; k < isas.size(); ++k) {
        CAPTURE(rounding);
        CAPTURE(n);
        CAPTURE(isas[k]);
        CHECK(same_bits(portable, final_state(isas[k], n, rounding)));
      }
    }
  }
}

TEST_CASE("bf16 moments: the thread count and slicing by seed change no bit") {
  const int threads = at::get_num_threads();
  for (const std::string& isa : available_isas()) {
    CAPTURE(isa);
    at::set_num_threads(1);
    const auto one = final_state(isa, 1000003, "stochastic");
    at::set_num_threads(3);
    const auto three = final_state(isa, 1000003, "stochastic");
    CHECK(same_bits(one, three));
  }
  at::set_num_threads(threads);

  // The same elements stepped whole, and as two slices whose seeds continue each other.
  IsaScope scope("portable");
  auto opt = make_optimizer(with_states(Hyper{}, "bf16", "stochastic"));
  const int64_t n = 1001, cut = 389;
  torch::manual_seed(5);
  Bf16Shard whole{torch::randn({n}), torch::randn({n}), torch::zeros({n}, torch::kBFloat16),
                  torch::zeros({n}, torch::kBFloat16), 777};
  Bf16Shard a{whole.param.slice(0, 0, cut).clone(), whole.grad.slice(0, 0, cut),
              torch::zeros({cut}, torch::kBFloat16), torch::zeros({cut}, torch::kBFloat16), 777};
  Bf16Shard b{whole.param.slice(0, cut).clone(), whole.grad.slice(0, cut),
              torch::zeros({n - cut}, torch::kBFloat16), torch::zeros({n - cut}, torch::kBFloat16),
              777 + cut};
  for (int64_t step = 1; step <= 4; ++step) {
    opt->step({whole.view()}, zt::StepArgs{step, 1e-2, 1.0});
    opt->step({a.view(), b.view()}, zt::StepArgs{step, 1e-2, 1.0});
  }
  CHECK(torch::equal(whole.exp_avg, torch::cat({a.exp_avg, b.exp_avg})));
  CHECK(torch::equal(whole.exp_avg_sq, torch::cat({a.exp_avg_sq, b.exp_avg_sq})));
  CHECK(torch::equal(whole.param, torch::cat({a.param, b.param})));
}

TEST_CASE("bf16 moments: a shard whose keys cross 2^32 draws the same bits whole and sliced") {
  // Keys seed + i from 2^32 - 500: the low half carries inside the shard. The whole shard took
  // its high half's mix for every element, a slice past the carry the next one's: a group of
  // more than 2^32 elements drew other bits in memory than streamed in tiles.
  const uint64_t seed = (uint64_t{1} << 32) - 500;
  const int64_t n = 1001;
  for (const std::string& isa : available_isas()) {
    for (int64_t cut : {int64_t{389}, int64_t{700}}) {
      CAPTURE(isa);
      CAPTURE(cut);
      IsaScope scope(isa);
      auto opt = make_optimizer(with_states(Hyper{}, "bf16", "stochastic"));
      torch::manual_seed(9);
      Bf16Shard whole{torch::randn({n}), torch::randn({n}), torch::zeros({n}, torch::kBFloat16),
                      torch::zeros({n}, torch::kBFloat16), seed};
      Bf16Shard a{whole.param.slice(0, 0, cut).clone(), whole.grad.slice(0, 0, cut),
                  torch::zeros({cut}, torch::kBFloat16), torch::zeros({cut}, torch::kBFloat16),
                  seed};
      Bf16Shard b{whole.param.slice(0, cut).clone(), whole.grad.slice(0, cut),
                  torch::zeros({n - cut}, torch::kBFloat16),
                  torch::zeros({n - cut}, torch::kBFloat16), seed + static_cast<uint64_t>(cut)};
      for (int64_t step = 1; step <= 3; ++step) {
        opt->step({whole.view()}, zt::StepArgs{step, 1e-2, 1.0});
        opt->step({a.view()}, zt::StepArgs{step, 1e-2, 1.0});
        opt->step({b.view()}, zt::StepArgs{step, 1e-2, 1.0});
      }
      CHECK(same_bits(
          {whole.exp_avg, whole.exp_avg_sq},
          {torch::cat({a.exp_avg, b.exp_avg}), torch::cat({a.exp_avg_sq, b.exp_avg_sq})}));
    }
  }
}

TEST_CASE("stochastic rounding is unbiased: a moment between two bf16 values rounds up as often "
          "as its fraction says") {
  // One step from zero moments with beta1 = 0.5 makes exp_avg = g / 2 exactly, so every element
  // holds the same fp32 moment, 0.3 of the way from one bf16 value to the next.
  const float low = 1.0f, step_size = 1.0f / 128;  // bf16 spacing in [1, 2)
  const float value = low + 0.3f * step_size;
  const int64_t n = 200000;
  Hyper h;
  h.beta1 = 0.5;
  h.weight_decay = 0;
  for (const std::string& isa : available_isas()) {
    CAPTURE(isa);
    IsaScope scope(isa);
    auto opt = make_optimizer(with_states(h, "bf16", "stochastic"));
    Bf16Shard s{torch::zeros({n}), torch::full({n}, 2 * value), torch::zeros({n}, torch::kBFloat16),
                torch::zeros({n}, torch::kBFloat16), 99};
    opt->step({s.view()}, zt::StepArgs{1, 1e-3, 1.0});
    const torch::Tensor m = s.exp_avg.to(torch::kFloat);
    const double up = (m == low + step_size).to(torch::kDouble).mean().item<double>();
    const double down = (m == low).to(torch::kDouble).mean().item<double>();
    CHECK(up + down == doctest::Approx(1.0));
    // 0.3 within 5 standard deviations of a binomial mean over n draws (sd ~ 0.001).
    CHECK(up == doctest::Approx(0.3).epsilon(0.017));
    // The mean of the stored moments is the fp32 moment, which rounding to nearest misses by 0.3
    // of a step every time.
    CHECK(m.mean().item<double>() == doctest::Approx(value).epsilon(1e-4));
  }
}

TEST_CASE("bf16 moments by default round stochastically, so exp_avg_sq decays as in fp32") {
  // v = 1 and no gradient: fp32 gives 0.999^100 = 0.905 after 100 steps. To nearest, v * 0.999
  // is within half a spacing (2^-9) of 1 and rounds back, every step: v never decays, and after
  // a gradient spike Adam's step stays small for good.
  const int64_t n = 100000, steps = 100;
  Hyper h;
  h.weight_decay = 0;
  std::map<std::string, zt::Value> defaults = h.values();
  defaults["state_dtype"] = std::string("bf16");
  for (const auto& [name, values] :
       {std::pair{"default", defaults}, std::pair{"nearest", with_states(h, "bf16", "nearest")}}) {
    CAPTURE(name);
    auto opt = make_optimizer(values);
    Bf16Shard s{torch::zeros({n}), torch::zeros({n}), torch::zeros({n}, torch::kBFloat16),
                torch::ones({n}, torch::kBFloat16), 4242};
    for (int64_t step = 1; step <= steps; ++step)
      opt->step({s.view()}, zt::StepArgs{step, 1e-3, 1.0});
    const double mean = s.exp_avg_sq.to(torch::kDouble).mean().item<double>();
    const double fp32 = std::pow(0.999, steps);
    if (std::string(name) == "nearest") {
      CHECK(mean == 1.0);
    } else {
      CHECK(mean == doctest::Approx(fp32).epsilon(0.005));
    }
  }
}

TEST_CASE("bf16 states: bad options and tensors are refused by name") {
  Hyper h;
  // fp32 states are exact: either rounding loads (the default was nearest once, and a config
  // printed then says so) and steps as fp32.
  for (const char* rounding : {"stochastic", "nearest"}) {
    CAPTURE(rounding);
    auto fp32 = make_optimizer(with_states(h, "fp32", rounding));
    CHECK((fp32->state_dtype() == torch::kFloat));
  }
  auto opt = make_optimizer(with_states(h, "bf16", "nearest"));
  Shard fp32_states(8);
  CHECK_THROWS_WITH_AS(opt->step({fp32_states.view()}, zt::StepArgs{1, 1e-3, 1.0}),
                       doctest::Contains("state exp_avg"), zt::InternalError);
}
