// Work: the handle every asynchronous operation returns: collectives (communicator.h) and
// offload transfers (offload.h). It is the c10d Work contract: the op runs on its own; the
// handle says whether it finished and, through wait(), rethrows how it failed. The op keeps its
// buffers alive until it completes; dropping the handle does not cancel the op.
// FutureWork and IoWork are the implementations plugins share: the thread that runs the op
// calls complete() once.
// Thread safety: every method may be called from any thread, concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zt/api.h"

namespace zt {

class ZT_API Work {
 public:
  virtual ~Work();
  // True once the op finished, successfully or not. Never blocks, never throws.
  virtual bool is_completed() = 0;
  // Blocks until the op finished or `timeout` passed; may be called again, by several threads.
  //   timeout: in, the longest wait.
  // Returns normally only when the op succeeded. Throws the op's own error (a CommError from a
  // collective, an IoError from a transfer: whatever the op failed with, unchanged, every time
  // it is called), or, when the op did not finish in time, a CommError naming the op and the
  // timeout (IoError for storage, see IoWork). The op is not cancelled by a timeout.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
  // wait(t) with the timeout the op's issuer chose (for collectives: from launch.timeout_s).
  virtual void wait() = 0;
  // The failure, if the op completed with one; null while running or after success. Never
  // throws.
  virtual std::exception_ptr exception() = 0;
};

// A Work completed by another thread: the shared implementation for communication plugins.
class ZT_API FutureWork : public Work {
 public:
  //   what:            in, names the op in timeout messages, e.g. "comm_ucx all_gather #12
  //                    (4.0 MiB) on rank 1".
  //   default_timeout: in, what wait() without an argument waits.
  FutureWork(std::string what, std::chrono::milliseconds default_timeout);
  ~FutureWork() override;

  bool is_completed() override;
  void wait(std::chrono::milliseconds timeout) override;
  void wait() override;
  std::exception_ptr exception() override;

  // Marks the op finished and wakes every waiter. Called by the thread that ran the op, after it
  // stopped touching the op's buffers; the first call's result stands, later ones are ignored
  // (a second complete(nullptr) turned an op that had failed into one that succeeded).
  //   error: in, the op's failure (std::current_exception() in a catch), or null for success.
  void complete(std::exception_ptr error = nullptr);
  const std::string& what() const { return what_; }
  // Runs `fn(failed)` once the op finished: on the completing thread, right after complete()
  // woke the waiters, or at once on the caller's thread if it already finished. For observers
  // (flight_recorder.h): `fn` must be quick and must not throw.
  void on_complete(std::function<void(bool failed)> fn);

 private:
  std::string what_;
  std::chrono::milliseconds default_timeout_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void(bool)>> callbacks_;
};

// A FutureWork for storage I/O (offload tiers): a wait that runs out is an IoError about the
// storage, not a CommError about peers. The transfer's own failure is rethrown unchanged.
class ZT_API IoWork : public FutureWork {
 public:
  using FutureWork::FutureWork;
  using FutureWork::wait;
  void wait(std::chrono::milliseconds timeout) override;
};

// A Work that is already done when it is handed out, for synchronous paths that must still return
// a handle (a copy in host memory, a collective over one rank). A failure given here is delivered
// by wait() and exception(), as an asynchronous op's would be, so callers have one error path.
class ZT_API CompletedWork final : public Work {
 public:
  explicit CompletedWork(std::exception_ptr error = nullptr);
  bool is_completed() override;
  void wait(std::chrono::milliseconds timeout) override;
  void wait() override;
  std::exception_ptr exception() override;

 private:
  std::exception_ptr error_;
};

// Runs `body` on the caller's thread and returns a CompletedWork holding what it threw, if
// anything: `return run_now([&] { dst.copy_(src); });`.
ZT_API std::shared_ptr<Work> run_now(const std::function<void()>& body);

}  // namespace zt
