// FutureWork and SerialExecutor: the async machinery comm plugins share; finishing_work, the
// core's Work that completes a result on its first wait (core/src/sdk/finishing_work.h).
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "../test_util.h"
#include "sdk/finishing_work.h"
#include "zt/error.h"
#include "zt/serial_executor.h"
#include "zt/work.h"

using namespace std::chrono_literals;

TEST_CASE("SerialExecutor runs tasks in submission order, off the caller's thread") {
  zt::SerialExecutor executor;
  std::vector<int> order;
  std::thread::id caller = std::this_thread::get_id(), runner;
  for (int i = 0; i < 100; ++i) {
    executor.submit([&, i] {
      order.push_back(i);
      runner = std::this_thread::get_id();
    });
  }
  executor.drain();
  REQUIRE(order.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(order[i] == i);
  CHECK(runner != caller);
}

TEST_CASE("a task that throws does not stop the executor") {
  zt::SerialExecutor executor;
  std::atomic<int> ran{0};
  executor.submit([] { throw std::runtime_error("boom"); });
  executor.submit([&] { ran++; });
  executor.drain();
  CHECK(ran == 1);
}

TEST_CASE("SerialExecutor completes an op's work with the task's exception, or with success") {
  // With the plain submit, a task that threw before completing its work left the waiter to time
  // out blaming the peers, the task's own error lost.
  zt::SerialExecutor executor;
  auto failed = std::make_shared<zt::FutureWork>("comm_x all_gather #1", 5000ms);
  executor.submit(failed, [] { throw zt::InternalError("comm_x: a shard of the wrong size"); });
  CHECK_THROWS_WITH_AS(failed->wait(), "comm_x: a shard of the wrong size", zt::InternalError);
  auto done = std::make_shared<zt::FutureWork>("comm_x all_gather #2", 5000ms);
  std::atomic<int> ran{0};
  executor.submit(done, [&] { ran++; });
  done->wait();
  CHECK(ran == 1);
  // A task that completed its work itself keeps that result.
  auto own = std::make_shared<zt::FutureWork>("comm_x all_gather #3", 5000ms);
  executor.submit(own, [own] {
    own->complete(std::make_exception_ptr(zt::CommError("rank 1 is unreachable")));
  });
  CHECK_THROWS_WITH_AS(own->wait(), "rank 1 is unreachable", zt::CommError);
  executor.drain();
  CHECK(executor.take_retained().size() == 1);  // the task that threw, kept for its buffers
}

TEST_CASE("FutureWork keeps its first result: a later complete() does not undo a failure") {
  zt::FutureWork work("op", 1000ms);
  work.complete(std::make_exception_ptr(zt::CommError("rank 2 is unreachable")));
  work.complete();
  CHECK_THROWS_WITH_AS(work.wait(), "rank 2 is unreachable", zt::CommError);
}

TEST_CASE("FutureWork: wait times out naming the op, then returns once completed") {
  auto work = std::make_shared<zt::FutureWork>("comm_x all_reduce #3", 50ms);
  CHECK_FALSE(work->is_completed());
  try {
    work->wait(20ms);
    FAIL("expected a timeout");
  } catch (const zt::CommError& e) {
    CHECK(zt::test::contains(e.what(), "comm_x all_reduce #3 did not complete within 20 ms"));
  }
  std::thread t([work] { work->complete(); });
  work->wait(5000ms);
  t.join();
  CHECK(work->is_completed());
  CHECK(work->exception() == nullptr);
}

TEST_CASE("FutureWork rethrows the op's own failure") {
  zt::FutureWork work("op", 1000ms);
  work.complete(std::make_exception_ptr(zt::CommError("rank 2 is unreachable")));
  CHECK(work.is_completed());
  CHECK(work.exception() != nullptr);
  CHECK_THROWS_WITH_AS(work.wait(), "rank 2 is unreachable", zt::CommError);
}

TEST_CASE("IoWork: a wait that runs out is an I/O error about the storage, and the op's own errors "
          "pass") {
  zt::IoWork work("offload_nvme: read of 4096 bytes", 1000ms);
  try {
    work.wait(20ms);
    FAIL("expected a timeout");
  } catch (const zt::IoError& e) {
    CHECK(zt::test::contains(e.what(),
                             "offload_nvme: read of 4096 bytes did not complete within 20 ms"));
    CHECK(zt::test::contains(e.what(), "storage"));
  }
  work.complete(std::make_exception_ptr(zt::IoError("short read of region 'x'")));
  CHECK_THROWS_WITH_AS(work.wait(), "short read of region 'x'", zt::IoError);
}

namespace {

// An IoWork whose transfer fails with a storage error just as its wait runs out: between the
// timeout and the wait's look at whether it finished.
class FailsAtTheTimeout final : public zt::IoWork {
 public:
  using zt::IoWork::IoWork;
  bool is_completed() override {
    if (!failed_) {
      failed_ = true;
      complete(
          std::make_exception_ptr(zt::IoError("write of region 'x': No space left on device")));
    }
    return zt::IoWork::is_completed();
  }

 private:
  bool failed_ = false;
};

}  // namespace

TEST_CASE("IoWork: a transfer that fails as the wait runs out gives its own error, not the "
          "timeout's") {
  FailsAtTheTimeout work("offload_nvme: write of 4096 bytes", 1000ms);
  CHECK_THROWS_WITH_AS(work.wait(0ms), "write of region 'x': No space left on device", zt::IoError);
}

TEST_CASE("CompletedWork is done at once and delivers the failure it was given") {
  zt::CompletedWork ok;
  CHECK(ok.is_completed());
  CHECK(ok.exception() == nullptr);
  CHECK_NOTHROW(ok.wait(0ms));
  zt::CompletedWork failed(std::make_exception_ptr(zt::IoError("short read of region 'x'")));
  CHECK(failed.is_completed());
  CHECK(failed.exception() != nullptr);
  CHECK_THROWS_WITH_AS(failed.wait(), "short read of region 'x'", zt::IoError);
  // The failure is delivered on every wait, not only the first.
  CHECK_THROWS_AS(failed.wait(0ms), zt::IoError);
}

TEST_CASE("run_now runs the body on the caller's thread, and wait() gives back what it threw") {
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  auto done = zt::run_now([&] { ran_on = std::this_thread::get_id(); });
  CHECK(ran_on == caller);
  CHECK(done->is_completed());
  CHECK_NOTHROW(done->wait());
  auto failed = zt::run_now([] { throw zt::CommError("rank 1 of 1 cannot fail"); });
  CHECK(failed->is_completed());
  CHECK_THROWS_WITH_AS(failed->wait(), "rank 1 of 1 cannot fail", zt::CommError);
}

TEST_CASE("finishing_work: the finish runs once, on the first wait that sees the op succeed") {
  auto op = std::make_shared<zt::FutureWork>("op", 1000ms);
  int runs = 0;
  auto work = zt::finishing_work(op, [&] { ++runs; });
  CHECK_FALSE(work->is_completed());
  CHECK_THROWS_AS(work->wait(10ms), zt::CommError);  // not finished: nothing runs
  CHECK(runs == 0);
  op->complete();
  CHECK(work->is_completed());
  CHECK(runs == 0);  // not before a wait
  work->wait();
  work->wait(10ms);
  CHECK(runs == 1);
  CHECK(work->exception() == nullptr);

  // A failed op runs nothing and gives its own error; a finish that throws is rethrown by
  // every wait and reported by exception().
  auto failed = std::make_shared<zt::FutureWork>("failed", 1000ms);
  auto not_run = zt::finishing_work(failed, [&] { ++runs; });
  failed->complete(std::make_exception_ptr(zt::CommError("peer gone")));
  CHECK_THROWS_WITH_AS(not_run->wait(), "peer gone", zt::CommError);
  CHECK(runs == 1);
  auto throwing = zt::finishing_work(std::make_shared<zt::CompletedWork>(), [&] {
    ++runs;
    throw zt::InternalError("decode failed");
  });
  CHECK_THROWS_WITH_AS(throwing->wait(), "decode failed", zt::InternalError);
  CHECK_THROWS_WITH_AS(throwing->wait(), "decode failed", zt::InternalError);
  CHECK(runs == 2);
  CHECK(throwing->exception() != nullptr);
}
