// checkpointed_forward (core/src/zero/activation_checkpoint.h): a checkpointed chain of units gives
// bitwise the gradients of the plain chain (dropout included, a tied weight, a first input that
// needs no grad), runs each unit's forward twice, keeps no intermediate alive between forward
// and backward, and fires each parameter's gradient-ready hook once per backward as the engine
// expects.
#include <doctest/doctest.h>
#include <torch/torch.h>

#include <torch/csrc/autograd/function_hook.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zero/activation_checkpoint.h"
#include "zt/unit.h"

namespace {

class CountingUnit final : public zt::Unit {
 public:
  CountingUnit(std::vector<std::pair<std::string, at::Tensor>> params,
               std::function<at::Tensor(const at::Tensor&)> fn)
      : params_(std::move(params)), fn_(std::move(fn)) {}
  std::string name() const override { return "counting"; }
  at::Tensor forward(const at::Tensor& x) override {
    ++calls;
    return fn_(x);
  }
  std::vector<std::pair<std::string, at::Tensor>> parameters() override { return params_; }
  int calls = 0;

 private:
  std::vector<std::pair<std::string, at::Tensor>> params_;
  std::function<at::Tensor(const at::Tensor&)> fn_;
};

class CountHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit CountHook(int& count) : count_(count) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    ++count_;
    return outputs;
  }

 private:
  int& count_;
};

// Three units like the engine oracle's model: w0 is used by the first and, tied, by the last.
struct Model {
  at::Tensor w0, b0, w1, b1, b2;
  std::vector<std::unique_ptr<CountingUnit>> units;
  int w0_ready = 0;  // AccumulateGrad post hook calls of w0, as the engine counts them
  std::shared_ptr<torch::autograd::Node>
      w0_accumulator;  // kept alive, as the engine does: it carries the hook

  Model() {
    at::Generator gen = at::detail::createCPUGenerator(7);
    auto make = [&](std::vector<int64_t> shape) {
      return at::randn(shape, gen).requires_grad_(true);
    };
    w0 = make({6, 4});
    b0 = make({6});
    w1 = make({6, 6});
    b1 = make({6});
    b2 = make({4});
    units.push_back(std::make_unique<CountingUnit>(
        std::vector<std::pair<std::string, at::Tensor>>{{"w0", w0}, {"b0", b0}},
        [this](const at::Tensor& x) {
      return at::dropout(at::sin(at::linear(x, w0, b0)), 0.3, /*train=*/true);
        }));
    units.push_back(std::make_unique<CountingUnit>(
        std::vector<std::pair<std::string, at::Tensor>>{{"w1", w1}, {"b1", b1}},
        [this](const at::Tensor& x) { return at::tanh(at::linear(x, w1, b1)) * at::sin(x); }));
    units.push_back(std::make_unique<CountingUnit>(
        std::vector<std::pair<std::string, at::Tensor>>{{"w0", w0}, {"b2", b2}},
        [this](const at::Tensor& x) { return at::matmul(x, w0) + b2; }));
    w0_accumulator = torch::autograd::impl::grad_accumulator(w0);
    w0_accumulator->add_post_hook(std::make_unique<CountHook>(w0_ready));
  }

  std::vector<at::Tensor> params() const { return {w0, b0, w1, b1, b2}; }

  at::Tensor run(const at::Tensor& x, bool checkpoint) {
    at::Tensor h = x;
    for (auto& u : units) h = checkpoint ? zt::checkpointed_forward(*u, h) : u->forward(h);
    return h.pow(2).sum();
  }
};

struct Outcome {
  std::vector<at::Tensor> grads;
  at::Tensor next_random;  // the first draw after the step: the recompute must not shift it
  std::vector<int> calls;
  int w0_ready = 0;
};

Outcome train_step(bool checkpoint) {
  Model m;
  at::Tensor x = at::randn({5, 4}, at::detail::createCPUGenerator(11));  // needs no grad
  at::manual_seed(123);
  m.run(x, checkpoint).backward();
  Outcome out;
  for (const auto& p : m.params()) out.grads.push_back(p.grad().clone());
  out.next_random = at::rand({4});
  for (const auto& u : m.units) out.calls.push_back(u->calls);
  out.w0_ready = m.w0_ready;
  return out;
}

}  // namespace

TEST_CASE("checkpointed units give bitwise the plain gradients and run forward twice") {
  Outcome plain = train_step(false);
  Outcome ckpt = train_step(true);
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    CAPTURE(i);
    REQUIRE(ckpt.grads[i].defined());
    CHECK(at::equal(plain.grads[i], ckpt.grads[i]));
  }
  CHECK(plain.calls == std::vector<int>{1, 1, 1});
  CHECK(ckpt.calls == std::vector<int>{2, 2, 2});
  // The engine reduces a group when every parameter's hook fired once: the tied w0 too.
  CHECK(plain.w0_ready == 1);
  CHECK(ckpt.w0_ready == 1);
  // The recompute replayed the forward's random numbers, then restored the stream.
  CHECK(at::equal(plain.next_random, ckpt.next_random));
}

TEST_CASE("a checkpointed unit keeps no intermediate alive until backward") {
  at::Tensor w = at::randn({3, 3}).requires_grad_(true);
  c10::weak_intrusive_ptr<c10::StorageImpl> inner(c10::intrusive_ptr<c10::StorageImpl>{});
  CountingUnit unit({{"w", w}}, [&](const at::Tensor& x) {
    at::Tensor h = at::matmul(x, w);
    inner = h.storage().getWeakStorageImpl();
    return at::sin(h);  // sin saves its input h for backward
  });
  at::Tensor x = at::randn({2, 3});

  at::Tensor plain = unit.forward(x);
  CHECK_FALSE(inner.expired());  // the plain graph holds h

  at::Tensor ckpt = zt::checkpointed_forward(unit, x);
  CHECK(inner.expired());  // the checkpointed one holds only x
  REQUIRE(ckpt.grad_fn());
  CHECK(ckpt.grad_fn()->name() == "zt::CheckpointBackward");
  CHECK(ckpt.grad_fn()->num_outputs() == 2);  // edges to the input and to w, nothing else
  ckpt.sum().backward();
  CHECK(unit.calls == 3);
  at::Tensor want = torch::autograd::grad({plain.sum()}, {w})[0];
  CHECK(at::equal(w.grad(), want));
}

TEST_CASE("gradient of an input that requires grad, and grad() for the input only") {
  at::Tensor w = at::randn({4, 4}).requires_grad_(true);
  CountingUnit unit({{"w", w}, {"w again", w}},
                    [&](const at::Tensor& x) { return at::tanh(at::matmul(x, w)); });
  at::Tensor x = at::randn({3, 4}).requires_grad_(true);
  at::Tensor want = torch::autograd::grad({unit.forward(x).pow(2).sum()}, {x})[0];
  at::Tensor got = torch::autograd::grad({zt::checkpointed_forward(unit, x).pow(2).sum()}, {x})[0];
  CHECK(at::equal(want, got));
  CHECK_FALSE(w.grad().defined());  // grad() asked for x only: nothing accumulated into w

  // A parameter listed twice still gets its gradient once.
  zt::checkpointed_forward(unit, x).sum().backward();
  at::Tensor plain_w = torch::autograd::grad({unit.forward(x).sum()}, {w})[0];
  CHECK(at::equal(w.grad(), plain_w));
}

TEST_CASE("without grad mode a checkpointed forward is a plain forward") {
  at::Tensor w = at::randn({2, 2}).requires_grad_(true);
  CountingUnit unit({{"w", w}}, [&](const at::Tensor& x) { return at::matmul(x, w); });
  at::NoGradGuard no_grad;
  at::Tensor y = zt::checkpointed_forward(unit, at::ones({1, 2}));
  CHECK_FALSE(y.requires_grad());
  CHECK(unit.calls == 1);
}
