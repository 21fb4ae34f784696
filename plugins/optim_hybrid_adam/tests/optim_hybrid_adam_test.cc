// optim_hybrid_adam, loaded through the plugin catalog as the engine loads it, with the kernel
// it picks for this CPU: the update against a double-precision reference (every length 0..67
// and one large shard), 20-step trajectories against LibTorch's own torch::optim::AdamW and
// torch::optim::Adam (with every kernel this CPU runs), the bf16/fp16 copy-out and 16-bit
// gradients, and the errors bad input must raise; then the split of a step by device: host
// shards of every type in one step each get the CPU kernel's bits of stepping them alone, a
// shard on two devices or on one that is neither CPU nor CUDA is refused by name, and a build
// without the CUDA kernel refuses CUDA shards saying how to rebuild. kernels_test.cc covers
// each kernel in depth.
#include <doctest/doctest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adam_test_support.h"

namespace {

using namespace zt_adam_test;

// The elements of `ours` farther than 1e-5 |torch| + 1e-7 from LibTorch's `torch` (a NaN is off
// too), with the first five described in `said`.
int64_t count_off_libtorch(const float* ours, const float* torch, int64_t n,
                           std::vector<std::string>& said) {
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::abs(static_cast<double>(ours[i]) - torch[i]);
    if (!(err <= 1e-5 * std::abs(torch[i]) + 1e-7) && off++ < 5) {
      said.push_back("element " + std::to_string(i) + ": ours " + std::to_string(ours[i]) +
                     ", LibTorch " + std::to_string(torch[i]));
    }
  }
  return off;
}

template <typename TorchOptimizer, typename TorchOptions>
void check_trajectory_against_libtorch(bool adamw, const std::string& isa) {
  // Non-zero weight decay, LLM-style betas, a loss-scale divisor that is not a power of two and
  // a changing lr: every input of the update differs from its default.
  Hyper h;
  h.lr = 1e-2;
  h.beta1 = 0.9;
  h.beta2 = 0.95;
  h.eps = 1e-8;
  h.weight_decay = 0.1;
  h.adamw = adamw;
  const double divisor = 3.0;
  const std::vector<int64_t> sizes = {1, 7, 64, 1000, 4099};

  torch::manual_seed(adamw ? 11 : 12);
  std::vector<torch::Tensor> reference;
  std::vector<Shard> shards;
  for (int64_t n : sizes) {
    shards.emplace_back(n);
    reference.push_back(shards.back().param.clone().requires_grad_(true));
  }
  // Shards 1 and 3 take no weight decay (ShardTensors::weight_decay false): LibTorch's second
  // parameter group, with weight_decay 0.
  auto decays = [](size_t k) { return k != 1 && k != 3; };
  auto options = [&](double weight_decay) {
    auto o = std::make_unique<TorchOptions>(h.lr);
    o->betas({h.beta1, h.beta2}).eps(h.eps).weight_decay(weight_decay);
    return o;
  };
  std::vector<torch::Tensor> decayed, exempt;
  for (size_t k = 0; k < reference.size(); ++k)
    (decays(k) ? decayed : exempt).push_back(reference[k]);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, options(h.weight_decay));
  groups.emplace_back(exempt, options(0.0));
  TorchOptimizer torch_opt(groups, *options(h.weight_decay));
  auto ours = make_optimizer(h.values());

  // fp32 agreement: |ours - torch| <= 1e-5 |torch| + 1e-7 per element after every step. The
  // kernels multiply by reciprocals formed once per step and fuse four multiply-adds where
  // LibTorch divides and rounds each op, so the two differ by a few ulps, not more.
  double worst_rel = 0;
  double worst_abs = 0;
  for (int64_t step = 1; step <= 20; ++step) {
    const double lr = scheduled_lr(h, step);
    for (auto& group : torch_opt.param_groups()) static_cast<TorchOptions&>(group.options()).lr(lr);
    std::vector<zt::ShardTensors> views;
    for (size_t k = 0; k < shards.size(); ++k) {
      shards[k].grad = torch::randn({sizes[k]});
      reference[k].mutable_grad() = shards[k].grad / divisor;
      views.push_back(shards[k].view());
      views.back().weight_decay = decays(k);
    }
    torch_opt.step();
    ours->step(views, zt::StepArgs{step, lr, divisor});
    for (size_t k = 0; k < shards.size(); ++k) {
      const float* a = shards[k].param.data_ptr<float>();
      const torch::Tensor expected = reference[k].detach();
      const float* b = expected.data_ptr<float>();
      for (int64_t i = 0; i < sizes[k]; ++i) {
        const double err = std::abs(static_cast<double>(a[i]) - b[i]);
        worst_abs = worst_of(worst_abs, err);
        worst_rel = worst_of(worst_rel, err / std::max<double>(std::abs(b[i]), 1e-2));
      }
      std::vector<std::string> said;
      const int64_t failures = count_off_libtorch(a, b, sizes[k], said);
      for (const std::string& s : said)
        FAIL_CHECK("step " << step << " size " << sizes[k] << " " << s);
      CHECK(failures == 0);
    }
  }
  MESSAGE(std::string(adamw ? "AdamW" : "Adam")
          << " (" << isa << " kernel): worst |ours - LibTorch| / max(|LibTorch|, 0.01) over 20 "
          << "steps: " << worst_rel << ", worst |ours - LibTorch|: " << worst_abs);
}

}  // namespace

TEST_CASE("options, defaults and state names") {
  std::vector<std::string> names;
  for (const auto& spec : plugin().options()) names.push_back(spec.name);
  CHECK(names == std::vector<std::string>{"lr", "betas", "eps", "weight_decay", "adamw",
                                          "state_dtype", "state_rounding", "master_dtype",
                                          "master_rounding"});
  auto opt = make_optimizer({});
  CHECK(opt->base_lr() == 1e-3);
  CHECK(opt->state_names() == std::vector<std::string>{"exp_avg", "exp_avg_sq"});
  CHECK((opt->state_dtype() == at::kFloat));
  CHECK((opt->master_dtype() == at::kFloat));
  CHECK(make_optimizer({{"lr", 3e-4}})->base_lr() == 3e-4);
}

TEST_CASE("fp32 update vs a double-precision reference, lengths 0..67 and 1,000,003") {
  torch::manual_seed(1);
  for (bool adamw : {true, false}) {
    CAPTURE(adamw);
    Hyper h;
    h.adamw = adamw;
    WorstError worst;
    for (int64_t n = 0; n <= 67; ++n) {
      CAPTURE(n);
      run_reference_case(h, n, 5, 3.0, worst);
    }
    run_reference_case(h, 1000003, 3, 1024.0 * 3, worst);
    MESSAGE(std::string(adamw ? "AdamW" : "Adam")
            << ": worst error / bound: p " << worst.p << ", m " << worst.m << ", v " << worst.v
            << "; worst relative error of p where |p| >= 1e-3: " << worst.p_rel);
  }
}

TEST_CASE("a NaN in the kernel's result fails both oracles: the double reference and LibTorch's") {
  // The comparisons are written so that a NaN cannot pass them (a NaN compares false both ways).
  torch::manual_seed(3);
  const Hyper h;
  auto opt = make_optimizer(h.values());
  Shard s(37);
  const torch::Tensor p0 = s.param.clone(), m0 = s.exp_avg.clone(), v0 = s.exp_avg_sq.clone();
  opt->step({s.view()}, zt::StepArgs{1, h.lr, 1.0});
  WorstError worst;
  REQUIRE(compare_step_with_reference(h, 1, h.lr, 1.0, p0, s.grad, m0, v0, s, worst).failures == 0);
  s.param[5] = std::numeric_limits<float>::quiet_NaN();
  const StepComparison planted = compare_step_with_reference(h, 1, h.lr, 1.0, p0, s.grad, m0, v0, s,
                                                             worst);
  CHECK(planted.failures == 1);
  REQUIRE(planted.first.size() == 1);
  CHECK(planted.first[0].find("element 5") != std::string::npos);
  CHECK(std::isnan(worst.p));

  const torch::Tensor torch_result = s.param.clone();
  torch_result[5] = 0.5f;
  std::vector<std::string> said;
  CHECK(count_off_libtorch(s.param.data_ptr<float>(), torch_result.data_ptr<float>(), 37, said) ==
        1);
  CHECK(count_off_libtorch(torch_result.data_ptr<float>(), s.param.data_ptr<float>(), 37, said) ==
        1);
}

TEST_CASE("no weight decay and late steps: bias corrections near 1, the decay skipped") {
  torch::manual_seed(2);
  Hyper h;
  h.weight_decay = 0;
  h.beta2 = 0.95;
  auto opt = make_optimizer(h.values());
  Shard s(33);
  s.exp_avg = torch::randn({33}) * 0.1;
  s.exp_avg_sq = torch::rand({33}) * 0.01;
  WorstError worst;
  for (int64_t step = 1000; step < 1003; ++step) {
    s.grad = torch::randn({33});
    const torch::Tensor p0 = s.param.clone(), m0 = s.exp_avg.clone(), v0 = s.exp_avg_sq.clone();
    opt->step({s.view()}, zt::StepArgs{step, h.lr, 1.0});
    check_step_against_reference(h, step, h.lr, 1.0, p0, s.grad, m0, v0, s, worst);
  }
}

TEST_CASE("20-step fp32 trajectory equals torch::optim::AdamW element by element") {
  for (const std::string& isa : available_isas()) {
    CAPTURE(isa);
    IsaScope scope(isa);
    check_trajectory_against_libtorch<torch::optim::AdamW, torch::optim::AdamWOptions>(true, isa);
  }
}

TEST_CASE(
    "20-step fp32 trajectory equals torch::optim::Adam (L2 weight decay) element by element") {
  for (const std::string& isa : available_isas()) {
    CAPTURE(isa);
    IsaScope scope(isa);
    check_trajectory_against_libtorch<torch::optim::Adam, torch::optim::AdamOptions>(false, isa);
  }
}

TEST_CASE("copy_out holds the updated params rounded to bf16 / fp16") {
  torch::manual_seed(3);
  for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
    CAPTURE(dtype);
    auto opt = make_optimizer(Hyper{}.values());
    for (int64_t n : {0, 1, 17, 4099}) {
      Shard s(n);
      s.copy_out = torch::full({n}, 7.0, torch::dtype(dtype));
      for (int64_t step = 1; step <= 3; ++step) {
        s.grad = torch::randn({n});
        opt->step({s.view()}, zt::StepArgs{step, 1e-2, 2.0});
        CHECK(torch::equal(s.copy_out, s.param.to(dtype)));
      }
    }
  }
}

TEST_CASE("bf16 / fp16 gradients give exactly the fp32 result of the same values") {
  torch::manual_seed(4);
  for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
    CAPTURE(dtype);
    for (bool adamw : {true, false}) {
      Hyper h;
      h.adamw = adamw;
      auto low = make_optimizer(h.values());
      auto full = make_optimizer(h.values());
      Shard a(1001);
      Shard b(1001);
      b.param = a.param.clone();
      for (int64_t step = 1; step <= 3; ++step) {
        a.grad = torch::randn({1001}).to(dtype);
        b.grad = a.grad.to(torch::kFloat);
        low->step({a.view()}, zt::StepArgs{step, 1e-2, 5.0});
        full->step({b.view()}, zt::StepArgs{step, 1e-2, 5.0});
      }
      CHECK(torch::equal(a.param, b.param));
      CHECK(torch::equal(a.exp_avg, b.exp_avg));
      CHECK(torch::equal(a.exp_avg_sq, b.exp_avg_sq));
    }
  }
}

TEST_CASE("several shards in one step, a bad one rejected before any is touched") {
  torch::manual_seed(5);
  auto opt = make_optimizer(Hyper{}.values());
  Shard good(10);
  Shard bad(10);
  bad.grad = torch::randn({11});
  const torch::Tensor before = good.param.clone();
  CHECK_THROWS_AS(opt->step({good.view(), bad.view()}, zt::StepArgs{1, 1e-2, 1.0}),
                  zt::InternalError);
  CHECK(torch::equal(good.param, before));
  CHECK(torch::equal(good.exp_avg, torch::zeros({10})));
}

TEST_CASE("bad tensors throw InternalError naming the shard, the tensor and the problem") {
  auto opt = make_optimizer(Hyper{}.values());
  const zt::StepArgs args{1, 1e-2, 1.0};
  auto throws_with = [&](const Shard& s, const char* text) {
    CHECK_THROWS_WITH_AS(opt->step({s.view()}, args), doctest::Contains(text), zt::InternalError);
  };
  {
    Shard s(16);
    s.param = torch::randn({8, 2}).t();
    throws_with(s, "shard 0: param is not contiguous");
  }
  {
    Shard s(8);
    s.grad = torch::randn({16}).slice(0, 0, 16, 2);
    throws_with(s, "grad is not contiguous");
  }
  {
    Shard s(8);
    s.grad = torch::randn({9});
    throws_with(s, "grad has 9 elements but param has 8");
  }
  {
    Shard s(8);
    s.exp_avg_sq = torch::zeros({7});
    throws_with(s, "state exp_avg_sq has 7 elements");
  }
  {
    Shard s(8);
    s.copy_out = torch::zeros({6}, torch::kBFloat16);
    throws_with(s, "copy_out has 6 elements");
  }
  {
    Shard s(8);
    s.copy_out = torch::zeros({8});
    throws_with(s, "copy_out has dtype Float");
  }
  {
    Shard s(8);
    s.grad = torch::randn({8}, torch::kDouble);
    throws_with(s, "grad has dtype Double");
  }
  {
    Shard s(8);
    s.param = torch::randn({8}).to(torch::kBFloat16);
    throws_with(s, "param has dtype BFloat16");
  }
  {
    Shard s(8);
    s.exp_avg = torch::zeros({8}, torch::kInt);
    throws_with(s, "state exp_avg has dtype Int");
  }
  {
    Shard s(8);
    s.grad = torch::Tensor();
    throws_with(s, "grad is undefined");
  }
  {
    Shard s(8);
    s.grad = torch::empty({8}, torch::device(torch::kMeta));
    throws_with(s, "grad is on meta");
  }
  {
    Shard s(8);
    zt::ShardTensors view = s.view();
    view.states.pop_back();
    CHECK_THROWS_WITH_AS(opt->step({view}, args), doctest::Contains("expected 2"),
                         zt::InternalError);
  }
  Shard s(8);
  CHECK_THROWS_WITH_AS(opt->step({s.view()}, zt::StepArgs{0, 1e-2, 1.0}),
                       doctest::Contains("1-based"), zt::InternalError);
  CHECK_THROWS_AS(opt->step({s.view()}, zt::StepArgs{1, 1e-2, 0.0}), zt::InternalError);
  CHECK_THROWS_AS(opt->step({s.view()}, zt::StepArgs{1, -1.0, 1.0}), zt::InternalError);
}

TEST_CASE("invalid options are ConfigErrors naming the key") {
  auto throws_for = [](std::map<std::string, zt::Value> values, const char* key) {
    CHECK_THROWS_WITH_AS(make_optimizer(std::move(values)), doctest::Contains(key),
                         zt::ConfigError);
  };
  const char* betas = "plugin.optim_hybrid_adam.betas";
  throws_for({{"betas", std::vector<double>{1.0, 0.999}}}, betas);
  throws_for({{"betas", std::vector<double>{0.9, 1.5}}}, betas);
  throws_for({{"betas", std::vector<double>{-0.1, 0.999}}}, betas);
  throws_for({{"betas", std::vector<double>{0.9}}}, betas);
  throws_for({{"betas", std::vector<double>{0.9, 0.99, 0.999}}}, betas);
  throws_for({{"betas", std::vector<double>{0.9, NAN}}}, betas);
  throws_for({{"lr", 0.0}}, "plugin.optim_hybrid_adam.lr");
  throws_for({{"eps", 0.0}}, "plugin.optim_hybrid_adam.eps");
  // Positive as a double, 0 in the fp32 the kernels compute in (0/0 where a moment is still 0).
  throws_for({{"eps", 1e-46}}, "plugin.optim_hybrid_adam.eps");
  throws_for({{"lr", 1e39}}, "plugin.optim_hybrid_adam.lr");
  throws_for({{"weight_decay", -0.1}}, "plugin.optim_hybrid_adam.weight_decay");
  // Finite as doubles, infinite in fp32: an L2 term or a decay factor of inf.
  throws_for({{"weight_decay", 1e39}}, "plugin.optim_hybrid_adam.weight_decay");
  throws_for({{"lr", 1e20}, {"weight_decay", 1e20}}, "plugin.optim_hybrid_adam.weight_decay");
  CHECK_NOTHROW(make_optimizer({{"lr", 1e-3}, {"weight_decay", 0.1}}));
  CHECK_NOTHROW(make_optimizer({{"betas", std::vector<double>{0.0, 0.95}}}));
}

// ---- The split of a step by device, as far as a CPU-only machine can exercise it -------------
// A CPU-only LibTorch cannot allocate CUDA memory, but it can label host memory as cuda:0
// (from_blob with a target device allocates nothing and calls no CUDA): such tensors stand in
// for CUDA ones in the checks below, which must refuse them before reading through them.
// tests/cuda_kernel_test.cc runs real CUDA shards where there is a GPU.

namespace {

struct TypedShard {
  int64_t n;
  torch::Dtype grad_type;
  std::optional<torch::Dtype> copy_type;
};

}  // namespace

TEST_CASE("host shards of every gradient and copy-out type in one step: each as if alone") {
  // One step over shards of all nine (gradient, copy-out) combinations and an empty one must
  // give, shard by shard, the bits of a step over that shard alone, and agree with the double
  // reference: the split by device and type sends each to the CPU kernel with its own types.
  torch::manual_seed(31);
  const std::vector<TypedShard> kinds = {
      {1000, torch::kFloat, std::nullopt},     {17, torch::kBFloat16, std::nullopt},
      {0, torch::kFloat, torch::kBFloat16},    {4099, torch::kHalf, std::nullopt},
      {64, torch::kFloat, torch::kBFloat16},   {65, torch::kBFloat16, torch::kBFloat16},
      {3, torch::kHalf, torch::kBFloat16},     {129, torch::kFloat, torch::kHalf},
      {70000, torch::kBFloat16, torch::kHalf}, {33, torch::kHalf, torch::kHalf}};
  for (bool adamw : {true, false}) {
    CAPTURE(adamw);
    Hyper h;
    h.adamw = adamw;
    auto together = make_optimizer(h.values());
    auto alone = make_optimizer(h.values());
    std::vector<Shard> a, b;
    for (const TypedShard& k : kinds) {
      a.emplace_back(k.n);
      b.emplace_back(k.n);
      b.back().param = a.back().param.clone();
      if (k.copy_type) {
        a.back().copy_out = torch::zeros({k.n}, torch::dtype(*k.copy_type));
        b.back().copy_out = torch::zeros({k.n}, torch::dtype(*k.copy_type));
      }
    }
    WorstError worst;
    for (int64_t step = 1; step <= 3; ++step) {
      const double lr = scheduled_lr(h, step);
      const zt::StepArgs args{step, lr, 3.0};
      std::vector<zt::ShardTensors> views;
      std::vector<torch::Tensor> p0, m0, v0;
      for (size_t i = 0; i < kinds.size(); ++i) {
        a[i].grad = torch::randn({kinds[i].n}).to(kinds[i].grad_type);
        b[i].grad = a[i].grad.clone();
        p0.push_back(a[i].param.clone());
        m0.push_back(a[i].exp_avg.clone());
        v0.push_back(a[i].exp_avg_sq.clone());
        views.push_back(a[i].view());
      }
      together->step(views, args);
      for (size_t i = 0; i < kinds.size(); ++i) {
        CAPTURE(i);
        alone->step({b[i].view()}, args);
        CHECK(torch::equal(a[i].param, b[i].param));
        CHECK(torch::equal(a[i].exp_avg, b[i].exp_avg));
        CHECK(torch::equal(a[i].exp_avg_sq, b[i].exp_avg_sq));
        check_step_against_reference(h, step, lr, 3.0, p0[i], a[i].grad.to(torch::kFloat), m0[i],
                                     v0[i], a[i], worst);
        if (kinds[i].copy_type) {
          CHECK(torch::equal(a[i].copy_out, a[i].param.to(*kinds[i].copy_type)));
          CHECK(torch::equal(a[i].copy_out, b[i].copy_out));
        }
      }
    }
  }
}

TEST_CASE("a shard whose tensors are on different devices is refused by name, nothing touched") {
  auto opt = make_optimizer(Hyper{}.values());
  const zt::StepArgs args{1, 1e-2, 1.0};
  Shard good(16);
  const torch::Tensor before = good.param.clone();
  auto throws_with = [&](const Shard& bad, const char* text) {
    CHECK_THROWS_WITH_AS(opt->step({good.view(), bad.view()}, args), doctest::Contains(text),
                         zt::InternalError);
    CHECK(torch::equal(good.param, before));
    CHECK(torch::equal(good.exp_avg, torch::zeros({16})));
  };
  {
    Shard bad(8);
    bad.grad = torch::empty({8}, torch::device(torch::kMeta));
    throws_with(bad, "shard 1: grad is on meta but param is on cpu; every tensor of a shard "
                     "must be on its param's device");
  }
  {
    Shard bad(8);
    const torch::Tensor host = torch::zeros({8});
    bad.exp_avg_sq = labelled_cuda(host);
    throws_with(bad, "shard 1: state exp_avg_sq is on cuda:0 but param is on cpu");
  }
  {
    Shard bad(8);
    const torch::Tensor host = torch::zeros({8}, torch::kBFloat16);
    bad.copy_out = labelled_cuda(host);
    throws_with(bad, "shard 1: copy_out is on cuda:0 but param is on cpu");
  }
#if ZT_WITH_CUDA
  {
    // A CUDA param with a host gradient: refused before the CUDA kernel could read host memory.
    Shard bad(8);
    const torch::Tensor host = torch::zeros({8});
    const torch::Tensor m = torch::zeros({8}), v = torch::zeros({8});
    bad.param = labelled_cuda(host);
    bad.exp_avg = labelled_cuda(m);
    bad.exp_avg_sq = labelled_cuda(v);
    throws_with(bad, "shard 1: grad is on cpu but param is on cuda:0");
  }
#endif
}

TEST_CASE("a shard on neither the CPU nor a CUDA device is refused by name") {
  auto opt = make_optimizer(Hyper{}.values());
  const auto meta = torch::device(torch::kMeta);
  const zt::ShardTensors s{torch::empty({8}, meta),
                           torch::empty({8}, meta),
                           {torch::empty({8}, meta), torch::empty({8}, meta)},
                           {}};
  CHECK_THROWS_WITH_AS(opt->step({s}, zt::StepArgs{1, 1e-2, 1.0}),
                       doctest::Contains("shard 0: param is on meta; optim_hybrid_adam updates "
                                         "CPU and CUDA shards only"),
                       zt::InternalError);
}

#if !ZT_WITH_CUDA
TEST_CASE("without the CUDA kernel, a CUDA shard is a PluginError saying how to rebuild") {
  torch::manual_seed(32);
  auto opt = make_optimizer(Hyper{}.values());
  Shard host_shard(16);
  const torch::Tensor before = host_shard.param.clone();
  // A whole shard in "CUDA" memory: every tensor on cuda:0, so only the missing kernel is wrong.
  Shard backing(8);
  backing.copy_out = torch::zeros({8}, torch::kBFloat16);
  const torch::Tensor backing_param = backing.param.clone();
  const zt::ShardTensors cuda_shard{
      labelled_cuda(backing.param),
      labelled_cuda(backing.grad),
      {labelled_cuda(backing.exp_avg), labelled_cuda(backing.exp_avg_sq)},
      labelled_cuda(backing.copy_out)};
  try {
    opt->step({host_shard.view(), cuda_shard}, zt::StepArgs{1, 1e-2, 1.0});
    FAIL("a CUDA shard was accepted by a build without the CUDA kernel");
  } catch (const zt::PluginError& e) {
    const std::string message = e.what();
    CHECK(message.find("optim_hybrid_adam: shard 1: param is on cuda:0") != std::string::npos);
    CHECK(message.find("built without CUDA") != std::string::npos);
    CHECK(message.find("scripts/device-build.sh") != std::string::npos);
    MESSAGE(message);
  }
  // Neither the host shard nor the memory behind the CUDA-labelled one was touched.
  CHECK(torch::equal(host_shard.param, before));
  CHECK(torch::equal(host_shard.exp_avg, torch::zeros({16})));
  CHECK(torch::equal(backing.param, backing_param));
  CHECK(torch::equal(backing.copy_out, torch::zeros({8}, torch::kBFloat16)));
}
#endif
