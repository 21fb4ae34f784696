// ModelLayout (core/src/zero/model_layout.h): parameters registered once by tensor identity (a tied
// tensor owned by its first unit, used by both), groups as the strategy planned them, shards
// sized per rank, parameters turned into views of their group's flat buffer, gradients taken
// into one flat buffer, and a plan that breaks the rules refused with the unit's name.
#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "zero/model_layout.h"
#include "zt/error.h"
#include "zt/param_init.h"

namespace {

using Params = std::vector<std::pair<std::string, at::Tensor>>;

class ListUnit final : public zt::Unit {
 public:
  ListUnit(std::string name, Params params) : name_(std::move(name)), params_(std::move(params)) {}
  std::string name() const override { return name_; }
  at::Tensor forward(const at::Tensor& x) override { return x; }
  Params parameters() override { return params_; }

 private:
  std::string name_;
  Params params_;
};

// One group per tensor, padded to the world size; `plan_fn` may spoil it.
class PerTensor final : public zt::ShardStrategy {
 public:
  std::function<void(zt::ShardPlan&)> spoil;
  zt::ShardPlan plan(const std::vector<zt::TensorMeta>& tensors, int world) const override {
    zt::ShardPlan plan;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const int64_t padded = (tensors[t].numel + world - 1) / world * world;
      plan.groups.push_back({tensors[t].numel, padded, {{static_cast<int>(t), 0}}});
    }
    if (spoil) spoil(plan);
    return plan;
  }
};

at::Tensor param(std::vector<int64_t> shape, double start) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return at::arange(start, start + static_cast<double>(n), at::kFloat)
      .view(shape)
      .requires_grad_(true);
}

}  // namespace

TEST_CASE("a tied tensor is owned by its first unit and used by both") {
  at::Tensor w = param({3, 2}, 0), b = param({3}, 10), head_bias = param({5}, 20);
  ListUnit embed("embed", {{"w", w}, {"b", b}}), head("head", {{"w", w}, {"hb", head_bias}});
  PerTensor strategy;
  zt::ModelLayout layout({&embed, &head}, strategy, 2, 4);
  REQUIRE(layout.params.size() == 3);
  CHECK(layout.params[0].name == "w");
  CHECK(layout.params[2].name == "hb");
  REQUIRE(layout.groups.size() == 3);
  CHECK(layout.groups[2].padded == 6);  // 5 elements padded to a multiple of 2
  CHECK(layout.unit_groups[0] == std::vector<int>{0, 1});
  CHECK(layout.unit_groups[1] == std::vector<int>{0, 2});  // borrows w's group
  CHECK(layout.unit_uses(1, 0));
  CHECK_FALSE(layout.unit_uses(1, 1));
  CHECK(layout.largest_unit_bytes() == (6 + 6) * 4);
}

TEST_CASE("shards: this rank's slice from stage 1, all of it at stage 0, and persistence by the "
          "largest tensor") {
  at::Tensor small = param({3}, 0), large = param({9}, 0);
  ListUnit unit("u", {{"small", small}, {"large", large}});
  PerTensor strategy;
  zt::ModelLayout layout({&unit}, strategy, 3, 4);
  layout.size_shards(true, 2, true, 5);
  CHECK(layout.groups[1].shard == 3);
  CHECK(layout.groups[1].first == 6);
  CHECK(layout.groups[0].persistent);
  CHECK_FALSE(layout.groups[1].persistent);
  layout.size_shards(false, 2, false, 5);
  CHECK(layout.groups[1].shard == 9);
  CHECK(layout.groups[1].first == 0);
  CHECK(layout.groups[1].persistent);  // only stage 3 releases
}

TEST_CASE("built groups: parameters are views of the flat buffer, values kept, storage freed and "
          "restored") {
  at::Tensor a = param({2, 2}, 1), c = param({3}, 7);
  ListUnit unit("u", {{"a", a}, {"c", c}});
  PerTensor strategy;
  strategy.spoil = [](zt::ShardPlan& plan) {  // both tensors in one group: a at 0, c at 4
    plan.groups = {{7, 8, {{0, 0}, {1, 4}}}};
  };
  zt::ModelLayout layout({&unit}, strategy, 2, 2);
  at::Tensor full32 = layout.build_flat(0, at::kBFloat16);
  const zt::ParamGroup& g = layout.groups[0];
  CHECK((g.flat.scalar_type() == at::kBFloat16));
  CHECK(at::equal(full32, at::tensor({1.f, 2.f, 3.f, 4.f, 7.f, 8.f, 9.f, 0.f})));
  CHECK((a.scalar_type() == at::kBFloat16));
  CHECK((a.sizes() == at::IntArrayRef({2, 2})));
  g.flat.fill_(5);
  CHECK(c.to(at::kFloat).sum().item<float>() == 15.f);  // c sees the buffer's bytes
  zt::resize_flat_storage(g.flat, 0);
  CHECK(g.flat.storage().nbytes() == 0);
  zt::resize_flat_storage(g.flat, 8 * 2);
  g.flat.fill_(1);
  CHECK(a.to(at::kFloat).sum().item<float>() == 4.f);
}

TEST_CASE(
    "gradients are taken into one flat buffer, zeros where none arrived, predivided, .grad freed") {
  at::Tensor a = param({2}, 0), c = param({3}, 0);
  ListUnit unit("u", {{"a", a}, {"c", c}});
  PerTensor strategy;
  strategy.spoil = [](zt::ShardPlan& plan) { plan.groups = {{5, 6, {{0, 0}, {1, 2}}}}; };
  zt::ModelLayout layout({&unit}, strategy, 2, 4);
  layout.build_flat(0, at::kFloat);
  (a * 4).sum().backward();  // c gets no gradient
  at::Tensor flat = layout.take_flat_grads(0, at::kFloat, 2.0);
  CHECK(at::equal(flat, at::tensor({2.f, 2.f, 0.f, 0.f, 0.f, 0.f})));
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("a plan that breaks the rules is refused naming the unit") {
  at::Tensor a = param({4}, 0);
  ListUnit unit("block7", {{"a", a}});
  PerTensor strategy;
  strategy.spoil = [](zt::ShardPlan& plan) { plan.groups[0].padded_numel = 3; };
  CHECK_THROWS_WITH_AS(zt::ModelLayout({&unit}, strategy, 2, 4), doctest::Contains("block7"),
                       zt::InternalError);
}

TEST_CASE("a tie declared by its second unit under a name of its own is refused when attached") {
  // Two declared parameters sharing one tensor: the gradient went to the first, the values the
  // model reads came from the second's buffer, and the tie trained wrong without an error.
  auto decl = [](const std::string& name) {
    return zt::ParamEntry{name, name, {3, 2}, zt::ParamInit::normal(0.02), {}};
  };
  const std::vector<zt::UnitEntries> entries = {{decl("wte.weight")}, {decl("lm_head.weight")}};
  PerTensor strategy;
  zt::ModelLayout layout(entries, {"unit 0", "unit 1"}, strategy, 2, 4, 1);
  at::Tensor w = param({3, 2}, 0);
  ListUnit embed("embed", {{"wte.weight", w}}), head("head", {{"lm_head.weight", w}});
  layout.attach(0, embed);
  CHECK_THROWS_WITH_AS(layout.attach(1, head),
                       doctest::Contains("lists lm_head.weight as its own, but it is the tensor "
                                         "wte.weight already lists"),
                       zt::InternalError);
}

TEST_CASE("a released parameter attaches to its declaration, a zero-element matrix too") {
  // An engine of another arm (a live A/B switch) leaves stage-3 parameters released: empty
  // vectors without storage. A declared [0, 4] matrix has no elements either, and its released
  // form was taken for a unit that built it in another shape.
  auto decl = [](const std::string& name, std::vector<int64_t> shape) {
    return zt::ParamEntry{name, name, std::move(shape), zt::ParamInit::normal(0.02), {}};
  };
  const std::vector<zt::UnitEntries> entries = {
      {decl("empty.weight", {0, 4}), decl("fc.weight", {3, 2})}};
  PerTensor strategy;
  zt::ModelLayout layout(entries, {"unit 0"}, strategy, 2, 4, 1);
  ListUnit released("block", {{"empty.weight", at::empty({0}).requires_grad_(true)},
                              {"fc.weight", at::empty({0}).requires_grad_(true)}});
  CHECK_NOTHROW(layout.attach(0, released));
  // A shape that is neither the declared one nor a released vector is still refused.
  zt::ModelLayout other(entries, {"unit 0"}, strategy, 2, 4, 1);
  ListUnit wrong("block", {{"empty.weight", param({0, 4}, 0)}, {"fc.weight", param({2, 3}, 0)}});
  CHECK_THROWS_WITH_AS(other.attach(0, wrong),
                       doctest::Contains("built fc.weight as [2, 3] but declared it [3, 2]"),
                       zt::InternalError);
}
