// fill_param_init / init_param (zt/param_init.h): any slicing of a parameter gives the values of
// the whole fill, (seed, name) pairs get independent values, the normal and uniform draws have
// the stated statistics with neighbours uncorrelated, a custom init's slice is the slice of its
// full tensor, and bad arguments are InternalErrors naming the parameter.
#include <ATen/ATen.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../test_util.h"
#include "zt/error.h"
#include "zt/param_init.h"

using zt::ParamInit;

using zt::test::contains;

namespace {

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

at::Tensor fill_whole(const ParamInit& init, uint64_t seed, const std::string& name,
                      const std::vector<int64_t>& shape) {
  at::Tensor out = at::full({numel_of(shape)}, std::nan(""), at::kFloat);
  zt::fill_param_init(init, seed, name, shape, 0, out);
  return out;
}

// The parameter filled piece by piece, the pieces cut at `cuts` and filled in reverse order.
at::Tensor fill_in_pieces(const ParamInit& init, uint64_t seed, const std::string& name,
                          const std::vector<int64_t>& shape, std::vector<int64_t> cuts) {
  const int64_t n = numel_of(shape);
  cuts.push_back(0);
  cuts.push_back(n);
  std::sort(cuts.begin(), cuts.end());
  at::Tensor whole = at::full({n}, std::nan(""), at::kFloat);
  for (size_t i = cuts.size() - 1; i > 0; --i) {
    // A fresh tensor per piece, as a rank's shard is: nothing shared with the neighbours.
    at::Tensor piece = at::full({cuts[i] - cuts[i - 1]}, std::nan(""), at::kFloat);
    zt::fill_param_init(init, seed, name, shape, cuts[i - 1], piece);
    whole.narrow(0, cuts[i - 1], piece.numel()).copy_(piece);
  }
  return whole;
}

std::string error_of(const ParamInit& init, const std::vector<int64_t>& shape, int64_t first,
                     const at::Tensor& out) {
  return zt::test::error_of<zt::InternalError>(
      [&] { zt::fill_param_init(init, 1, "block3.attn.qkv.weight", shape, first, out); });
}

}  // namespace

TEST_CASE("any slicing gives the values of the whole fill, for every kind") {
  // 100003 elements: pieces cross at::parallel_for's task boundaries at odd places.
  const std::vector<int64_t> shape = {7, 14286, 1};
  const int64_t n = numel_of(shape);
  const ParamInit custom = ParamInit::from_function([](const at::Tensor& full) {
    full.copy_(at::arange(full.numel(), at::kFloat).reshape(full.sizes()).sin());
  });
  const ParamInit inits[] = {ParamInit::normal(0.02), ParamInit::uniform(0.3),
                             ParamInit::constant(-1.5), custom};
  std::mt19937_64 cut_rng(12345);
  for (const ParamInit& init : inits) {
    CAPTURE(static_cast<int>(init.kind));
    const at::Tensor whole = fill_whole(init, 42, "layer0.weight", shape);
    CHECK_FALSE(at::isnan(whole).any().item<bool>());
    for (int split = 0; split < 5; ++split) {
      std::vector<int64_t> cuts;
      const int pieces = 1 + split * 3;
      for (int i = 0; i < pieces; ++i) cuts.push_back(static_cast<int64_t>(cut_rng() % n));
      if (split == 4) cuts.push_back(cuts.front());  // an empty piece
      CAPTURE(split);
      CHECK(at::equal(fill_in_pieces(init, 42, "layer0.weight", shape, cuts), whole));
    }
    // One element alone, at the end: no dependence on its neighbour.
    at::Tensor last = at::empty({1}, at::kFloat);
    zt::fill_param_init(init, 42, "layer0.weight", shape, n - 1, last);
    CHECK(last.item<float>() == whole[n - 1].item<float>());
  }
}

TEST_CASE("values are a deterministic function of (seed, name): other names and seeds differ") {
  const std::vector<int64_t> shape = {64, 33};
  const ParamInit init = ParamInit::normal(1.0);
  const at::Tensor a = fill_whole(init, 7, "block1.attn.proj.weight", shape);
  CHECK(at::equal(a, fill_whole(init, 7, "block1.attn.proj.weight", shape)));
  // The global torch RNG plays no part.
  at::manual_seed(99);
  (void)at::randn({100});
  CHECK(at::equal(a, fill_whole(init, 7, "block1.attn.proj.weight", shape)));

  const at::Tensor others[] = {fill_whole(init, 8, "block1.attn.proj.weight", shape),
                               fill_whole(init, 7, "block10.attn.proj.weight", shape),
                               fill_whole(init, 7, "block1.attn.proj.weigh", shape),
                               fill_whole(init, 7, "", shape)};
  for (const at::Tensor& other : others) {
    // Independent draws: no element in common, and uncorrelated.
    CHECK(at::eq(a, other).sum().item<int64_t>() == 0);
    const double corr = at::corrcoef(at::stack({a, other})).index({0, 1}).item<double>();
    CHECK(std::abs(corr) < 5.0 / std::sqrt(static_cast<double>(a.numel())));
  }
  // A scale is only a factor: the kind's draws depend on (seed, name, index).
  CHECK(at::allclose(fill_whole(ParamInit::normal(0.5), 7, "block1.attn.proj.weight", shape),
                     a * 0.5));
}

TEST_CASE("normal: mean, std and the one-sigma mass of N(0, s^2) over 1M elements") {
  const int64_t n = 1 << 20;
  const double std_dev = 0.02;
  const at::Tensor x =
      fill_whole(ParamInit::normal(std_dev), 1234, "wte.weight", {n}).to(at::kDouble);
  const double sigma_mean = std_dev / std::sqrt(static_cast<double>(n));
  CHECK(std::abs(x.mean().item<double>()) < 5 * sigma_mean);
  CHECK(x.std().item<double>() == doctest::Approx(std_dev).epsilon(0.01));
  // The shape, not only two moments: P(|x| < s) = 0.682689 within 5 binomial sigmas.
  const double inside = (x.abs() < std_dev).to(at::kDouble).mean().item<double>();
  CHECK(std::abs(inside - 0.682689) < 5 * std::sqrt(0.682689 * 0.317311 / n));
  // Neighbouring elements are independent draws.
  const double lag1 = (x.narrow(0, 0, n - 1) * x.narrow(0, 1, n - 1)).mean().item<double>() /
                      (std_dev * std_dev);
  CHECK(std::abs(lag1) < 5.0 / std::sqrt(static_cast<double>(n)));
  CHECK(at::isfinite(x).all().item<bool>());
}

TEST_CASE("uniform: inside (-b, b), reaching both ends, mean 0 and variance b^2/3") {
  const int64_t n = 1 << 20;
  const double b = 0.125;
  const at::Tensor x = fill_whole(ParamInit::uniform(b), 5, "layer2.bias", {n}).to(at::kDouble);
  CHECK(x.min().item<double>() >= -b);
  CHECK(x.max().item<double>() <= b);
  CHECK(x.min().item<double>() < -b * (1 - 1e-4));
  CHECK(x.max().item<double>() > b * (1 - 1e-4));
  const double sigma = b / std::sqrt(3.0);
  CHECK(std::abs(x.mean().item<double>()) < 5 * sigma / std::sqrt(static_cast<double>(n)));
  CHECK(x.var().item<double>() == doctest::Approx(b * b / 3).epsilon(0.01));
  // Each tenth of the range holds a tenth of the elements.
  const at::Tensor counts = at::histc(x, 10, -b, b);
  CHECK(((counts / static_cast<double>(n) - 0.1).abs() < 0.003).all().item<bool>());
}

TEST_CASE("constant fills every element, and custom slices equal the full tensor it writes") {
  const at::Tensor ones = fill_whole(ParamInit::constant(1.0), 3, "ln_f.weight", {5, 3});
  CHECK(at::equal(ones, at::ones({15})));

  std::vector<int64_t> seen_shape;
  int calls = 0;
  const ParamInit custom = ParamInit::from_function([&](const at::Tensor& full) {
    seen_shape = full.sizes().vec();
    ++calls;
    full.copy_(at::arange(full.numel(), at::kFloat).reshape(full.sizes()) * 0.25);
  });
  at::Tensor slice = at::empty({7}, at::kFloat);
  zt::fill_param_init(custom, 3, "wpe.weight", {4, 5}, 11, slice);
  CHECK(seen_shape == std::vector<int64_t>{4, 5});
  CHECK(at::equal(slice, at::arange(11, 18, at::kFloat) * 0.25));
  // A rank that holds nothing of the tensor does not build it.
  zt::fill_param_init(custom, 3, "wpe.weight", {4, 5}, 20, at::empty({0}, at::kFloat));
  CHECK(calls == 1);

  const ParamInit reshaping = ParamInit::from_function(
      [](const at::Tensor& full) { full.resize_({full.numel() + 1}); });
  CHECK(
      contains(error_of(reshaping, {4, 5}, 0, at::empty({20})), "must write the values in place"));
}

TEST_CASE("init_param fills a whole parameter of any shape, outside autograd") {
  at::Tensor p = at::empty({6, 9}, at::kFloat).requires_grad_();
  const ParamInit init = ParamInit::uniform(0.5);
  zt::init_param(p, init, 77, "block0.mlp.fc.weight");
  CHECK(p.requires_grad());
  CHECK(p.is_leaf());
  CHECK(p.grad_fn() == nullptr);
  CHECK(at::equal(p.detach().reshape({-1}), fill_whole(init, 77, "block0.mlp.fc.weight", {6, 9})));
  // The leaf is still usable in a graph afterwards.
  (p * 2).sum().backward();
  CHECK(at::equal(p.grad(), at::full({6, 9}, 2.0f)));

  CHECK_THROWS_AS(zt::init_param(at::empty({3}, at::kDouble), init, 1, "x"), zt::InternalError);
  CHECK_THROWS_AS(zt::init_param(at::empty({3, 4}).t(), init, 1, "x"), zt::InternalError);
}

TEST_CASE("bad ranges and arguments are InternalErrors naming the parameter and the range") {
  const ParamInit normal = ParamInit::normal(0.02);
  std::string e = error_of(normal, {4, 5}, 15, at::empty({6}));
  CHECK(contains(e, "parameter 'block3.attn.qkv.weight'"));
  CHECK(contains(e, "shape [4, 5], 20 elements"));
  CHECK(contains(e, "elements [15, 21) are out of range"));
  CHECK(contains(error_of(normal, {4, 5}, -1, at::empty({2})), "elements [-1, 1)"));
  CHECK(error_of(normal, {4, 5}, 14, at::empty({6})) == "no exception");
  CHECK(error_of(normal, {4, 5}, 20, at::empty({0})) == "no exception");

  CHECK(contains(error_of(normal, {4, 5}, 0, at::empty({4}, at::kDouble)),
                 "must be a contiguous 1-D fp32 CPU tensor"));
  CHECK(contains(error_of(normal, {4, 5}, 0, at::empty({2, 2})), "2 dimensions"));
  CHECK(
      contains(error_of(normal, {4, 5}, 0, at::empty({8}).as_strided({4}, {2})), "not contiguous"));
  CHECK(contains(error_of(normal, {4, 5}, 0, at::Tensor()), "undefined"));
  CHECK(contains(error_of(normal, {4, -5}, 0, at::empty({1})), "negative dimension"));
  CHECK(contains(error_of(ParamInit::normal(-1), {4}, 0, at::empty({4})), "scale -1"));
  CHECK(contains(error_of(ParamInit::uniform(std::nan("")), {4}, 0, at::empty({4})), "not usable"));
  CHECK(contains(error_of(ParamInit::from_function(nullptr), {4}, 0, at::empty({4})),
                 "custom init has no function"));
}
