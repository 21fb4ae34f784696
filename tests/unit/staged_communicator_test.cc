// StagedCommunicator (core/src/compose/staged_communicator.h): the inner communicator gets host
// copies, never the caller's tensors; an output is written when the op is waited for, from the
// inner op's host result, and not at all when the op failed; the in-place gather keeps the
// shard at its place; a split stays staged. Here the staged device is the CPU, as in the engine
// oracle's --staged cases; on a GPU the same code copies between the device and pinned memory.
#include <doctest/doctest.h>

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "compose/staged_communicator.h"
#include "solo_communicator.h"
#include "zt/error.h"
#include "zt/work.h"

namespace {

// Rank 1 of 2 whose ops finish when the test says so: an all-reduce doubles, a broadcast writes
// 7, a gather puts 5 in the other rank's shard and its own in its place. It records what it was
// handed.
class ManualCommunicator final : public zt::Communicator {
 public:
  int rank() const override { return 1; }
  int size() const override { return 2; }
  std::string name() const override { return "manual"; }
  std::shared_ptr<zt::Work> all_gather(const at::Tensor& out, const at::Tensor& in) override {
    got_out = out;
    got_in = in;
    return pending([out, in] {
      out.narrow(0, 0, out.numel() / 2).fill_(5);
      out.narrow(0, out.numel() / 2, out.numel() / 2).copy_(in);  // in place: itself
    });
  }
  std::shared_ptr<zt::Work> reduce_scatter(const at::Tensor& out, const at::Tensor& in,
                                           zt::ReduceOp) override {
    got_in = in;
    return pending([out, in] { out.copy_(in.narrow(0, out.numel(), out.numel()) * 2); });
  }
  std::shared_ptr<zt::Work> all_reduce(const at::Tensor& t, zt::ReduceOp) override {
    got_in = t;
    return pending([t] { t.mul_(2); });
  }
  std::shared_ptr<zt::Work> broadcast(const at::Tensor& t, int) override {
    got_in = t;
    return pending([t] { t.fill_(7); });
  }
  std::shared_ptr<zt::Work> barrier() override { return std::make_shared<zt::CompletedWork>(); }
  zt::CommStats stats() const override { return {}; }
  std::unique_ptr<zt::Communicator> split(int color, int) override {
    if (color < 0) return nullptr;
    return std::make_unique<zt::test::SoloCommunicator>();
  }

  // Runs the last op's effect and completes it, or fails it without the effect.
  void finish(bool fail = false) {
    if (fail) {
      work->complete(std::make_exception_ptr(zt::CommError("manual op failed")));
      return;
    }
    effect();
    work->complete();
  }

  at::Tensor got_out, got_in;
  std::shared_ptr<zt::FutureWork> work;
  std::function<void()> effect;

 private:
  std::shared_ptr<zt::Work> pending(std::function<void()> fn) {
    effect = std::move(fn);
    work = std::make_shared<zt::FutureWork>("manual op", std::chrono::milliseconds(1000));
    return work;
  }
};

struct Staged {
  ManualCommunicator* inner;
  std::unique_ptr<zt::StagedCommunicator> comm;
};

Staged staged() {
  auto inner = std::make_unique<ManualCommunicator>();
  ManualCommunicator* raw = inner.get();
  return {raw, std::make_unique<zt::StagedCommunicator>(std::move(inner), at::kCPU)};
}

}  // namespace

TEST_CASE("StagedCommunicator: the inner op gets host copies, the output is written on wait") {
  Staged s = staged();
  const at::Tensor t = at::arange(4, at::kFloat);
  auto work = s.comm->all_reduce(t, zt::ReduceOp::kSum);
  REQUIRE(s.inner->got_in.defined());
  CHECK_FALSE(s.inner->got_in.is_same(t));
  CHECK_FALSE(s.inner->got_in.is_alias_of(t));
  CHECK(at::equal(s.inner->got_in, t));
  s.inner->finish();
  CHECK(work->is_completed());
  CHECK(at::equal(t, at::arange(4, at::kFloat)));  // not before the wait
  work->wait();
  CHECK(at::equal(t, at::arange(4, at::kFloat) * 2));
  work->wait();  // a second wait copies nothing more
  CHECK(at::equal(t, at::arange(4, at::kFloat) * 2));

  const at::Tensor b = at::zeros({3}, at::kDouble);
  auto sent = s.comm->broadcast(b, 0);
  s.inner->finish();
  sent->wait(std::chrono::milliseconds(1000));
  CHECK(at::equal(b, at::full({3}, 7.0, at::kDouble)));

  const at::Tensor flat = at::arange(6, at::kFloat), shard = at::zeros({3}, at::kFloat);
  auto scattered = s.comm->reduce_scatter(shard, flat, zt::ReduceOp::kSum);
  CHECK_FALSE(s.inner->got_in.is_same(flat));
  s.inner->finish();
  scattered->wait();
  CHECK(at::equal(shard, at::arange(3, 6, at::kFloat) * 2));
}

TEST_CASE("StagedCommunicator: the in-place gather sends the shard from its place in the output") {
  Staged s = staged();
  const at::Tensor out = at::zeros({4}, at::kFloat);
  const at::Tensor mine = out.narrow(0, 2, 2);
  mine.fill_(3);
  auto work = s.comm->all_gather(out, mine);
  REQUIRE(s.inner->got_out.defined());
  CHECK_FALSE(s.inner->got_out.is_alias_of(out));
  CHECK(s.inner->got_in.is_alias_of(s.inner->got_out));
  CHECK(s.inner->got_in.storage_offset() - s.inner->got_out.storage_offset() == 2);
  CHECK(at::equal(s.inner->got_in, at::full({2}, 3.0f)));
  s.inner->finish();
  work->wait();
  CHECK(at::equal(out, at::tensor({5.0f, 5.0f, 3.0f, 3.0f})));

  // Not in place: the shard is copied on its own.
  const at::Tensor out2 = at::zeros({4}, at::kFloat), shard = at::full({2}, 4.0f);
  auto gathered = s.comm->all_gather(out2, shard);
  CHECK_FALSE(s.inner->got_in.is_alias_of(s.inner->got_out));
  CHECK_FALSE(s.inner->got_in.is_same(shard));
  s.inner->finish();
  gathered->wait();
  CHECK(at::equal(out2, at::tensor({5.0f, 5.0f, 4.0f, 4.0f})));

  // A shard of the same storage outside the output is no in-place gather: copied on its own.
  const at::Tensor storage = at::zeros({6}, at::kFloat);
  const at::Tensor out3 = storage.narrow(0, 0, 4), beyond = storage.narrow(0, 4, 2);
  beyond.fill_(6);
  auto apart = s.comm->all_gather(out3, beyond);
  CHECK_FALSE(s.inner->got_in.is_alias_of(s.inner->got_out));
  CHECK(at::equal(s.inner->got_in, at::full({2}, 6.0f)));
  s.inner->finish();
  apart->wait();
  CHECK(at::equal(storage, at::tensor({5.0f, 5.0f, 6.0f, 6.0f, 6.0f, 6.0f})));
}

TEST_CASE("StagedCommunicator: a failed op rethrows its error and writes no output") {
  Staged s = staged();
  const at::Tensor t = at::ones({2}, at::kFloat);
  auto work = s.comm->all_reduce(t, zt::ReduceOp::kSum);
  s.inner->finish(/*fail=*/true);
  CHECK(work->is_completed());
  CHECK(work->exception() != nullptr);
  CHECK_THROWS_AS(work->wait(), zt::CommError);
  CHECK_THROWS_AS(work->wait(), zt::CommError);
  CHECK(at::equal(t, at::ones({2}, at::kFloat)));
}

TEST_CASE("StagedCommunicator: a split stays staged, only a host communicator is staged") {
  Staged s = staged();
  CHECK(s.comm->device() == c10::Device(c10::kCPU));
  CHECK(s.comm->rank() == 1);
  CHECK(s.comm->size() == 2);
  CHECK(s.comm->describe().find("copied through host memory") != std::string::npos);
  std::unique_ptr<zt::Communicator> part = s.comm->split(0, 0);
  REQUIRE(part != nullptr);
  CHECK(dynamic_cast<zt::StagedCommunicator*>(part.get()) != nullptr);
  CHECK(s.comm->split(zt::kSplitNoColor, 0) == nullptr);
  CHECK_THROWS_AS(zt::StagedCommunicator(
                      std::make_unique<zt::test::SoloCommunicator>(c10::Device(c10::kCUDA, 0)),
                      c10::Device(c10::kCUDA, 0)),
                  zt::InternalError);
}
