// materialize_unit (zt/model_source.h) on a two-unit source whose second unit borrows the first
// one's tensor (a tied weight): owned tensors get their declared values, the borrowed one keeps
// its owner's, and a unit that does not match its declarations is an InternalError naming the
// unit and the tensor.
#include <ATen/ATen.h>

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../test_util.h"
#include "zt/error.h"
#include "zt/model_source.h"

using zt::test::contains;

namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class ListUnit final : public zt::Unit {
 public:
  ListUnit(std::string name, NamedTensors params)
      : name_(std::move(name)), params_(std::move(params)) {}
  std::string name() const override { return name_; }
  at::Tensor forward(const at::Tensor& x) override { return x.matmul(params_[0].second); }
  NamedTensors parameters() override { return params_; }

 private:
  std::string name_;
  NamedTensors params_;
};

// Unit 0 ("embed") owns tied [5, 3] and a.bias [3]; unit 1 ("head") owns b.weight [3, 4] and
// borrows tied. `fault` makes build() break its declarations one way.
class TiedSource final : public zt::ModelSource {
 public:
  enum class Fault { kNone, kWrongName, kWrongShape, kMissing, kNoGrad };
  explicit TiedSource(uint64_t seed, Fault fault = Fault::kNone) : seed_(seed), fault_(fault) {}

  int64_t unit_count() const override { return 2; }
  uint64_t seed() const override { return seed_; }
  std::vector<zt::ParamDecl> declare(int64_t unit) const override {
    if (unit == 0) {
      return {{"tied", {5, 3}, zt::ParamInit::normal(0.1)},
              {"a.bias", {3}, zt::ParamInit::constant(0.5)}};
    }
    // The borrowed tensor's init is ignored: its owner's values must survive.
    return {{"b.weight", {3, 4}, zt::ParamInit::uniform(0.2)},
            {"tied", {5, 3}, zt::ParamInit::constant(7.0)}};
  }
  std::unique_ptr<zt::Unit> build(int64_t unit) override {
    if (unit == 0) {
      tied_ = at::empty({5, 3}).requires_grad_();
      NamedTensors params = {{"tied", tied_}, {"a.bias", at::empty({3}).requires_grad_()}};
      return std::make_unique<ListUnit>("embed", std::move(params));
    }
    NamedTensors params = {{"b.weight", at::empty({3, 4}).requires_grad_()}, {"tied", tied_}};
    if (fault_ == Fault::kWrongName) params[0].first = "b.weights";
    if (fault_ == Fault::kWrongShape) params[0].second = at::empty({4, 3}).requires_grad_();
    if (fault_ == Fault::kMissing) params.pop_back();
    if (fault_ == Fault::kNoGrad) params[0].second = at::empty({3, 4});
    return std::make_unique<ListUnit>("head", std::move(params));
  }

 private:
  uint64_t seed_;
  Fault fault_;
  at::Tensor tied_;
};

at::Tensor declared_values(const zt::ParamInit& init, uint64_t seed, const std::string& name,
                           const std::vector<int64_t>& shape) {
  at::Tensor out = at::empty(shape, at::kFloat);
  zt::init_param(out, init, seed, name);
  return out;
}

std::string error_of(TiedSource::Fault fault) {
  TiedSource source(1, fault);
  zt::materialize_unit(source, 0);
  return zt::test::error_of<zt::InternalError>([&] { zt::materialize_unit(source, 1); });
}

}  // namespace

TEST_CASE(
    "materialize_unit writes owned tensors' declared values, and a borrowed one keeps its own") {
  TiedSource source(9);
  auto embed = zt::materialize_unit(source, 0);
  at::Tensor tied = embed->parameters()[0].second;
  const at::Tensor tied_values = tied.detach().clone();
  auto head = zt::materialize_unit(source, 1);

  CHECK(at::equal(tied_values, declared_values(zt::ParamInit::normal(0.1), 9, "tied", {5, 3})));
  CHECK(at::equal(embed->parameters()[1].second, at::full({3}, 0.5f)));
  CHECK(at::equal(head->parameters()[0].second,
                  declared_values(zt::ParamInit::uniform(0.2), 9, "b.weight", {3, 4})));
  // Same tensor object in both units, and unit 1's build left the owner's values in place.
  CHECK(head->parameters()[1].second.unsafeGetTensorImpl() == tied.unsafeGetTensorImpl());
  CHECK(at::equal(tied, tied_values));
  for (auto* unit : {embed.get(), head.get()}) {
    for (const auto& [name, t] : unit->parameters()) {
      CAPTURE(name);
      CHECK(t.requires_grad());
      CHECK(t.is_leaf());
    }
  }

  // Another seed, other values; the constants stay constants.
  TiedSource other(10);
  auto other_embed = zt::materialize_unit(other, 0);
  CHECK_FALSE(at::equal(other_embed->parameters()[0].second, tied));
  CHECK(at::equal(other_embed->parameters()[1].second, embed->parameters()[1].second));
}

TEST_CASE("a unit that differs from its declarations is an InternalError naming unit and tensor") {
  std::string e = error_of(TiedSource::Fault::kWrongName);
  CHECK(contains(e, "model source unit 1 (head)"));
  CHECK(contains(e, "'b.weights' [3, 4] but the declaration is 'b.weight' [3, 4]"));
  e = error_of(TiedSource::Fault::kWrongShape);
  CHECK(contains(e, "'b.weight' [4, 3] but the declaration is 'b.weight' [3, 4]"));
  e = error_of(TiedSource::Fault::kMissing);
  CHECK(contains(e, "lists 1 parameters but declared 2"));
  e = error_of(TiedSource::Fault::kNoGrad);
  CHECK(contains(e, "'b.weight' does not require grad"));
  CHECK(error_of(TiedSource::Fault::kNone) == "no exception");

  TiedSource source(1);
  CHECK_THROWS_WITH_AS(zt::materialize_unit(source, 2),
                       doctest::Contains("unit 2 is out of range; the model source has 2 units"),
                       zt::InternalError);
  CHECK_THROWS_AS(zt::materialize_unit(source, -1), zt::InternalError);
}
