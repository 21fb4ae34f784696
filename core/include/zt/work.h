// Work: the handle every asynchronous collective returns (the c10d Work contract).
// It keeps the op's tensors alive until completion; wait() rethrows the op's failure.
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "zt/api.h"

namespace zt {

class ZT_API Work {
 public:
  virtual ~Work();
  virtual bool is_completed() = 0;
  // Blocks until the op finished or `timeout` passed. Throws the op's error, or CommError
  // naming the op and the timeout when it did not finish in time (the op is not cancelled).
  virtual void wait(std::chrono::milliseconds timeout) = 0;
  // Waits with the communicator's configured timeout.
  virtual void wait() = 0;
  // The failure, if the op completed with one; null otherwise.
  virtual std::exception_ptr exception() = 0;
};

// A Work completed by another thread: the shared implementation for communication plugins.
class ZT_API FutureWork : public Work {
 public:
  // `what` names the op in timeout messages, e.g. "comm_ucx all_gather #12 (4.0 MiB) on rank 1".
  FutureWork(std::string what, std::chrono::milliseconds default_timeout);
  ~FutureWork() override;

  bool is_completed() override;
  void wait(std::chrono::milliseconds timeout) override;
  void wait() override;
  std::exception_ptr exception() override;

  // Called once by the executing thread.
  void complete(std::exception_ptr error = nullptr);
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  std::chrono::milliseconds default_timeout_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// A FutureWork for storage I/O (offload tiers): a wait that runs out is an IoError about the
// storage, not a CommError about peers.
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
