// optim_hybrid_adam with bf16 master weights (master_dtype = "bf16"), on every kernel this CPU
// runs, with fp32 moments, bf16 moments to nearest and bf16 moments stochastic:
//   - a bf16-master step is the fp32-master step from the widened master (same gradient, same
//     moments, same seed) with only the stored parameter rounded: to nearest, exactly as
//     Tensor::to(bf16) rounds; stochastically, to the bf16 neighbour that the element's 16
//     parameter bits (adam_kernel.h's param_stochastic_bits) pick. The moments are that fp32
//     step's, bit for bit, so a bf16 master changes nothing but the parameter's rounding;
//   - every kernel gives the portable one's bits, the thread count and slicing by seed none;
//   - stochastic rounding is unbiased where rounding to nearest never moves a weight, and over a
//     short AdamW run whose updates are 0.1 of a bf16 spacing it follows the fp32 run where
//     rounding to nearest stalls;
//   - NaN is stored as c10's 0x7FC0; wrong dtypes, a copy-out, a CUDA shard with bf16 masters and
//     master_rounding without bf16 masters are refused by name.
#include <doctest/doctest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../../../tests/skip.h"
#include "../adam_kernel.h"
#include "adam_test_support.h"

namespace {

using namespace zt_adam_test;
using zt::hybrid_adam::param_stochastic_bits;
using zt::hybrid_adam::stochastic_bits;
using zt::hybrid_adam::stochastic_mix;

// How the moments are kept: the three storages the plugin offers.
struct States {
  const char* name;
  const char* dtype;     // state_dtype
  const char* rounding;  // state_rounding
};
constexpr States kStates[] = {{"fp32 moments", "fp32", "nearest"},
                              {"bf16 moments to nearest", "bf16", "nearest"},
                              {"bf16 moments stochastic", "bf16", "stochastic"}};

torch::Dtype state_dtype(const States& states) {
  return std::string(states.dtype) == "bf16" ? torch::kBFloat16 : torch::kFloat;
}

// The options of an optimizer with `states`, and bf16 masters rounded by `master_rounding`
// (nullptr: fp32 masters, master_rounding not written).
std::map<std::string, zt::Value> options_for(const Hyper& h, const States& states,
                                             const char* master_rounding) {
  std::map<std::string, zt::Value> v = h.values();
  v["state_dtype"] = std::string(states.dtype);
  v["state_rounding"] = std::string(states.rounding);
  if (master_rounding != nullptr) {
    v["master_dtype"] = std::string("bf16");
    v["master_rounding"] = std::string(master_rounding);
  }
  return v;
}

// A shard with a master of any dtype and moments of any dtype.
struct MasterShard {
  torch::Tensor param, grad, exp_avg, exp_avg_sq;
  uint64_t seed = 0;
  zt::ShardTensors view() const { return {param, grad, {exp_avg, exp_avg_sq}, {}, seed}; }
};

MasterShard bf16_master_shard(int64_t n, const States& states, uint64_t seed) {
  const torch::Dtype moments = state_dtype(states);
  return {torch::randn({n}).to(torch::kBFloat16),
          {},
          torch::zeros({n}, moments),
          torch::zeros({n}, moments),
          seed};
}

// The fp32-master twin of `s`: the widened master, the same gradient, moments and seed.
MasterShard fp32_twin(const MasterShard& s) {
  return {s.param.to(torch::kFloat), s.grad, s.exp_avg.clone(), s.exp_avg_sq.clone(), s.seed};
}

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

const uint16_t* bf16_bits(const torch::Tensor& t) {
  return static_cast<const uint16_t*>(t.data_ptr());
}

// The bf16 bits adam_kernel.h's stochastic rounding stores for fp32 `x` with 16 random bits.
uint16_t stochastic_bf16(float x, uint32_t random16) {
  if (std::isnan(x)) return 0x7FC0;
  return static_cast<uint16_t>((bits_of(x) + random16) >> 16);
}

// The elements of `stored` (bf16) that are not the stochastic rounding of `exact` (fp32) with
// each element's parameter bits at `step`, or not one of its two bf16 neighbours; the first
// three are reported.
int64_t count_off_stochastic(const torch::Tensor& stored, const torch::Tensor& exact, uint64_t seed,
                             int64_t step) {
  const uint32_t mix = stochastic_mix(seed, step);
  const float* x = exact.data_ptr<float>();
  const uint16_t* p = bf16_bits(stored);
  int64_t off = 0;
  for (int64_t i = 0; i < exact.numel(); ++i) {
    const uint32_t random = param_stochastic_bits(stochastic_bits(seed, mix, i));
    const uint16_t below = static_cast<uint16_t>(bits_of(x[i]) >> 16);
    const bool neighbour = std::isnan(x[i]) || p[i] == below || p[i] == below + 1;
    if (!(neighbour && p[i] == stochastic_bf16(x[i], random)) && off++ < 3) {
      FAIL_CHECK("element " << i << " step " << step << ": p " << p[i] << " from " << x[i]);
    }
  }
  return off;
}

// Steps a bf16-master shard and its fp32-master twin three times and checks them as the file
// comment says, for every length in `lengths`.
void check_against_fp32_master(const std::string& isa, const Hyper& h, const States& states,
                               torch::Dtype grad_type, const char* rounding,
                               const std::vector<int64_t>& lengths) {
  IsaScope scope(isa);
  auto bf16 = make_optimizer(options_for(h, states, rounding));
  auto fp32 = make_optimizer(options_for(h, states, nullptr));
  CHECK((bf16->master_dtype() == torch::kBFloat16));
  CHECK((fp32->master_dtype() == torch::kFloat));
  const uint64_t seed = (uint64_t{5} << 40) + 4099;
  for (int64_t n : lengths) {
    CAPTURE(n);
    torch::manual_seed(static_cast<uint64_t>(n) + 57);
    MasterShard s = bf16_master_shard(n, states, seed);
    for (int64_t step = 1; step <= 3; ++step) {
      s.grad = (torch::randn({n}) * 4).to(grad_type);
      MasterShard twin = fp32_twin(s);
      const zt::StepArgs args{step, scheduled_lr(h, step), 4.0};
      fp32->step({twin.view()}, args);
      bf16->step({s.view()}, args);
      CHECK(torch::equal(s.exp_avg, twin.exp_avg));
      CHECK(torch::equal(s.exp_avg_sq, twin.exp_avg_sq));
      if (std::string(rounding) == "nearest") {
        CHECK(torch::equal(s.param, twin.param.to(torch::kBFloat16)));
      } else {
        CHECK(count_off_stochastic(s.param, twin.param, seed, step) == 0);
      }
    }
  }
}

std::vector<int64_t> all_tails_and_a_large_shard() {
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n <= 67; ++n) lengths.push_back(n);
  lengths.push_back(200003);
  return lengths;
}

// The final master and moments of 3 seeded steps, for bitwise comparisons.
std::vector<torch::Tensor> final_state(const std::string& isa, int64_t n, const States& states,
                                       const char* rounding) {
  IsaScope scope(isa);
  auto opt = make_optimizer(options_for(Hyper{}, states, rounding));
  torch::manual_seed(static_cast<uint64_t>(n) + 11);
  MasterShard s = bf16_master_shard(n, states, 24680);
  for (int64_t step = 1; step <= 3; ++step) {
    s.grad = torch::randn({n}).to(torch::kBFloat16);
    opt->step({s.view()}, zt::StepArgs{step, scheduled_lr(Hyper{}, step), 2.0});
  }
  return {s.param, s.exp_avg, s.exp_avg_sq};
}

}  // namespace

TEST_CASE("bf16 masters: every kernel is the fp32-master step with the master rounded once") {
  const std::vector<int64_t> lengths = all_tails_and_a_large_shard();
  for (const std::string& isa : available_isas()) {
    for (const Mode& mode : kModes) {
      Hyper h;
      h.adamw = mode.adamw;
      h.weight_decay = mode.weight_decay;
      for (torch::Dtype grad_type : kGradTypes) {
        for (const States& states : kStates) {
          for (const char* rounding : {"nearest", "stochastic"}) {
            CAPTURE(isa);
            CAPTURE(mode.name);
            CAPTURE(grad_type);
            CAPTURE(states.name);
            CAPTURE(rounding);
            check_against_fp32_master(isa, h, states, grad_type, rounding, lengths);
          }
        }
      }
    }
  }
}

TEST_CASE("bf16 masters: every kernel gives the portable kernel's bits, tails included") {
  const std::vector<std::string> isas = available_isas();
  if (isas.size() < 2)
    ZT_SKIP("this CPU runs only the portable kernel: nothing to compare it with");
  for (const States& states : kStates) {
    for (const char* rounding : {"nearest", "stochastic"}) {
      for (int64_t n : {1, 7, 15, 16, 17, 31, 33, 100003}) {
        const auto portable = final_state("portable", n, states, rounding);
        for (size_t k = 1; k < isas.size(); ++k) {
          CAPTURE(states.name);
          CAPTURE(rounding);
          CAPTURE(n);
          CAPTURE(isas[k]);
          CHECK(same_bits(portable, final_state(isas[k], n, states, rounding)));
        }
      }
    }
  }
}

TEST_CASE("bf16 masters: the thread count and slicing by seed change no bit") {
  const States& stochastic_states = kStates[2];
  const int threads = at::get_num_threads();
  for (const std::string& isa : available_isas()) {
    CAPTURE(isa);
    at::set_num_threads(1);
    const auto one = final_state(isa, 1000003, stochastic_states, "stochastic");
    at::set_num_threads(3);
    const auto three = final_state(isa, 1000003, stochastic_states, "stochastic");
    CHECK(same_bits(one, three));
  }
  at::set_num_threads(threads);

  // The same elements stepped whole, and as two slices whose seeds continue each other.
  for (const States& states : kStates) {
    CAPTURE(states.name);
    IsaScope scope("portable");
    auto opt = make_optimizer(options_for(Hyper{}, states, "stochastic"));
    const int64_t n = 1001, cut = 389;
    torch::manual_seed(6);
    MasterShard whole = bf16_master_shard(n, states, 777);
    whole.grad = torch::randn({n});
    MasterShard a{whole.param.slice(0, 0, cut).clone(), whole.grad.slice(0, 0, cut),
                  whole.exp_avg.slice(0, 0, cut).clone(), whole.exp_avg_sq.slice(0, 0, cut).clone(),
                  777};
    MasterShard b{whole.param.slice(0, cut).clone(), whole.grad.slice(0, cut),
                  whole.exp_avg.slice(0, cut).clone(), whole.exp_avg_sq.slice(0, cut).clone(),
                  777 + cut};
    for (int64_t step = 1; step <= 4; ++step) {
      opt->step({whole.view()}, zt::StepArgs{step, 1e-2, 1.0});
      opt->step({a.view(), b.view()}, zt::StepArgs{step, 1e-2, 1.0});
    }
    CHECK(torch::equal(whole.param, torch::cat({a.param, b.param})));
    CHECK(torch::equal(whole.exp_avg, torch::cat({a.exp_avg, b.exp_avg})));
    CHECK(torch::equal(whole.exp_avg_sq, torch::cat({a.exp_avg_sq, b.exp_avg_sq})));
  }
}

TEST_CASE("bf16 masters: stochastic rounding moves a weight by an update of 0.3 of a spacing as "
          "often as the fraction says, independently of how the moments round, and to "
          "nearest never") {
  // One step from zero moments with gradient -1 everywhere: every element moves from 1.0 (a bf16
  // value; the spacing above it is 2^-7) by lr, 0.3 of a spacing, up to the same fp32 value.
  const float spacing = 1.0f / 128;
  const int64_t n = 200000;
  Hyper h;
  h.lr = 0.3 * spacing;
  h.weight_decay = 0;
  const zt::StepArgs args{1, h.lr, 1.0};
  // Every element a bf16 1.0 with fresh moments of `states`.
  auto ones = [&](const States& states) {
    return MasterShard{torch::ones({n}, torch::kBFloat16), torch::full({n}, -1.0f),
                       torch::zeros({n}, state_dtype(states)),
                       torch::zeros({n}, state_dtype(states)), 4242};
  };
  for (const std::string& isa : available_isas()) {
    CAPTURE(isa);
    IsaScope scope(isa);
    MasterShard twin = fp32_twin(ones(kStates[0]));
    make_optimizer(options_for(h, kStates[0], nullptr))->step({twin.view()}, args);
    const float exact = twin.param[0].item<float>();
    const double fraction = (exact - 1.0) / spacing;
    REQUIRE(fraction == doctest::Approx(0.3).epsilon(0.01));

    MasterShard nearest = ones(kStates[0]);
    make_optimizer(options_for(h, kStates[0], "nearest"))->step({nearest.view()}, args);
    CHECK(torch::equal(nearest.param, torch::ones({n}, torch::kBFloat16)));

    // With stochastic moments too, whose bits come from the same element hash.
    MasterShard stochastic = ones(kStates[2]);
    make_optimizer(options_for(h, kStates[2], "stochastic"))->step({stochastic.view()}, args);
    const torch::Tensor p = stochastic.param.to(torch::kFloat);
    const double up = (p == 1.0f + spacing).to(torch::kDouble).mean().item<double>();
    const double down = (p == 1.0f).to(torch::kDouble).mean().item<double>();
    CHECK(up + down == doctest::Approx(1.0));
    // Within 5 standard deviations of a binomial mean over n draws (sd ~ 0.001), and so is the
    // mean of the stored weights around the fp32 weight.
    const double sd = std::sqrt(fraction * (1 - fraction) / n);
    CHECK(std::abs(up - fraction) <= 5 * sd);
    CHECK(std::abs(p.mean().item<double>() - exact) <= 5 * sd * spacing);

    // Independent: each moment rounds up as often among the weights that rounded up as among
    // all, within 5 standard deviations of the joint frequency.
    const torch::Tensor p_up = p == 1.0f + spacing;
    const std::pair<const torch::Tensor*, const torch::Tensor*> moments[] = {
        {&stochastic.exp_avg, &twin.exp_avg}, {&stochastic.exp_avg_sq, &twin.exp_avg_sq}};
    for (const auto& [stored, exact_moment] : moments) {
      const uint32_t below = bits_of(exact_moment->operator[](0).item<float>()) >> 16;
      const torch::Tensor m_up = stored->view(torch::kShort).to(torch::kInt).bitwise_and(0xFFFF) ==
                                 int64_t{below} + 1;
      const double m_up_rate = m_up.to(torch::kDouble).mean().item<double>();
      REQUIRE(m_up_rate > 0.05);  // the moment is not a bf16 value: it rounds
      REQUIRE(m_up_rate < 0.95);
      const double joint = (p_up & m_up).to(torch::kDouble).mean().item<double>();
      const double q = up * m_up_rate;
      CHECK(std::abs(joint - q) <= 5 * std::sqrt(q * (1 - q) / n));
    }
  }
}

TEST_CASE("bf16 masters: a NaN master or update is stored as c10's NaN, 0x7FC0") {
  for (const std::string& isa : available_isas()) {
    for (const char* rounding : {"nearest", "stochastic"}) {
      CAPTURE(isa);
      CAPTURE(rounding);
      IsaScope scope(isa);
      auto opt = make_optimizer(options_for(Hyper{}, kStates[0], rounding));
      const int64_t n = 37;  // a vector body and a tail on every kernel
      MasterShard s{torch::ones({n}, torch::kBFloat16), torch::ones({n}), torch::zeros({n}),
                    torch::zeros({n}), 1};
      // A negative NaN with a payload as master, and a NaN gradient, each somewhere.
      const uint16_t odd_nan = 0xFFC1;
      std::memcpy(static_cast<uint16_t*>(s.param.data_ptr()) + 3, &odd_nan, 2);
      s.grad[20] = NAN;
      s.grad[35] = NAN;
      opt->step({s.view()}, zt::StepArgs{1, 1e-3, 1.0});
      const uint16_t* p = bf16_bits(s.param);
      for (int64_t i : {3, 20, 35}) {
        CAPTURE(i);
        CHECK(p[i] == 0x7FC0);
      }
      CHECK(p[0] != 0x7FC0);
    }
  }
}

TEST_CASE("bf16 masters: an AdamW run with updates of 0.1 of a spacing follows fp32 when "
          "rounded stochastically and stalls when rounded to nearest") {
  // Minimise 0.5 (p - target)^2 per element from bf16 starts in [1, 1.5), target 0.3 above: the
  // gradient keeps its sign, so Adam moves each weight by about lr a step, 0.1 of the spacing
  // 2^-7, for 200 steps. Rounding to nearest returns every weight to where it was; stochastic
  // rounding moves it by the right amount on average.
  const int64_t n = 4096, steps = 200;
  const float spacing = 1.0f / 128;
  Hyper h;
  h.lr = 0.1 * spacing;
  h.weight_decay = 0.01;
  torch::manual_seed(2024);
  const torch::Tensor start = (1 + 0.5 * torch::rand({n})).to(torch::kBFloat16);
  const torch::Tensor target = start.to(torch::kFloat) + 0.3;
  auto run = [&](const char* rounding) {
    auto opt = make_optimizer(options_for(h, kStates[0], rounding));
    MasterShard s{rounding == nullptr ? start.to(torch::kFloat) : start.clone(),
                  {},
                  torch::zeros({n}),
                  torch::zeros({n}),
                  99};
    for (int64_t step = 1; step <= steps; ++step) {
      s.grad = s.param.to(torch::kFloat) - target;
      opt->step({s.view()}, zt::StepArgs{step, h.lr, 1.0});
    }
    return s.param.to(torch::kFloat);
  };
  const torch::Tensor fp32 = run(nullptr);
  const torch::Tensor nearest = run("nearest");
  const torch::Tensor stochastic = run("stochastic");
  const torch::Tensor start32 = start.to(torch::kFloat);
  const double moved = (fp32 - start32).mean().item<double>();
  REQUIRE(moved > 10 * spacing);  // the fp32 run does go somewhere
  CHECK(torch::equal(nearest, start32));
  const double stochastic_moved = (stochastic - start32).mean().item<double>();
  MESSAGE("mean movement over " << steps << " steps: fp32 " << moved << ", bf16 stochastic "
                                << stochastic_moved << ", bf16 to nearest 0");
  CHECK(std::abs(stochastic_moved - moved) <= 0.03 * moved);
}

TEST_CASE("bf16 masters: wrong dtypes, a copy-out, CUDA shards and stray options are refused") {
  Hyper h;
  const States& fp32_states = kStates[0];
  const zt::StepArgs args{1, 1e-3, 1.0};
  auto bf16 = make_optimizer(options_for(h, fp32_states, "stochastic"));
  auto fp32 = make_optimizer(options_for(h, fp32_states, nullptr));

  MasterShard fp32_master{torch::randn({8}), torch::randn({8}), torch::zeros({8}),
                          torch::zeros({8}), 0};
  CHECK_THROWS_WITH_AS(bf16->step({fp32_master.view()}, args),
                       doctest::Contains("shard 0: param has dtype Float, expected BFloat16"),
                       zt::InternalError);
  MasterShard bf16_master = fp32_master;
  bf16_master.param = torch::randn({8}).to(torch::kBFloat16);
  CHECK_THROWS_WITH_AS(fp32->step({bf16_master.view()}, args),
                       doctest::Contains("shard 0: param has dtype BFloat16, expected Float"),
                       zt::InternalError);

  // Nothing of the good shard 0 may change when shard 1 is refused.
  const torch::Tensor before = bf16_master.param.clone();
  zt::ShardTensors with_copy = bf16_master.view();
  with_copy.copy_out = torch::zeros({8}, torch::kBFloat16);
  CHECK_THROWS_WITH_AS(bf16->step({bf16_master.view(), with_copy}, args),
                       doctest::Contains("shard 1: copy_out is given with bf16 masters"),
                       zt::InternalError);
  CHECK(torch::equal(bf16_master.param, before));

  const torch::Tensor host_p = torch::zeros({8}, torch::kBFloat16), host_g = torch::zeros({8}),
                      host_m = torch::zeros({8}), host_v = torch::zeros({8});
  const zt::ShardTensors on_cuda{labelled_cuda(host_p),
                                 labelled_cuda(host_g),
                                 {labelled_cuda(host_m), labelled_cuda(host_v)},
                                 {}};
  CHECK_THROWS_WITH_AS(bf16->step({bf16_master.view(), on_cuda}, args),
                       doctest::Contains("CUDA kernel updates fp32 masters only"), zt::PluginError);
  CHECK(torch::equal(bf16_master.param, before));

  // master_rounding = "nearest" while the masters stay fp32: a ConfigError naming the key and the
  // way out. Its default, stochastic, is no contradiction even written out (as --print-config and
  // live A/B's arms write every key).
  const zt::OptimizerPlugin& p = plugin();
  auto create_written = [&](std::map<std::string, zt::Value> values) {
    return p.create(zt::Options("plugin.optim_hybrid_adam", p.options(), std::move(values),
                                {{"master_rounding", zt::SourceLocation{"job.toml", 9, 1}}}));
  };
  CHECK_THROWS_WITH_AS(create_written({{"master_rounding", std::string("nearest")}}),
                       doctest::Contains("plugin.optim_hybrid_adam.master_rounding"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(create_written({{"master_rounding", std::string("nearest")}}),
                       doctest::Contains("set master_dtype = \"bf16\" or drop master_rounding"),
                       zt::ConfigError);
  CHECK_NOTHROW(create_written({{"master_rounding", std::string("stochastic")}}));
  for (const char* rounding : {"stochastic", "nearest"}) {
    CAPTURE(rounding);
    CHECK_NOTHROW(create_written(
        {{"master_dtype", std::string("bf16")}, {"master_rounding", std::string(rounding)}}));
  }
  CHECK_NOTHROW(make_optimizer({{"master_dtype", std::string("fp32")}}));
  CHECK((make_optimizer({{"master_dtype", std::string("bf16")}})->master_dtype() ==
         torch::kBFloat16));

  // An unknown master_dtype: refused by the config loader's check of the declared choices, and
  // by create() should it arrive unchecked.
  for (const zt::OptionSpec& spec : p.options()) {
    if (spec.name != "master_dtype") continue;
    CHECK_THROWS_WITH_AS(
        zt::check_option(spec, std::string("fp16"), "plugin.optim_hybrid_adam", {"job.toml", 3, 1}),
        doctest::Contains("plugin.optim_hybrid_adam.master_dtype"), zt::ConfigError);
  }
  CHECK_THROWS_WITH_AS(make_optimizer({{"master_dtype", std::string("fp16")}}),
                       doctest::Contains("plugin.optim_hybrid_adam.master_dtype"), zt::ConfigError);
}
