// Work: the handle every asynchronous collective returns (the c10d Work contract).
// It keeps the op's tensors alive until completion; wait() rethrows the op's failure.
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>
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
  // Keeps an object (tensors, buffers) alive until the handle is destroyed.
  void keep_alive(std::shared_ptr<void> object) { keep_alive_.push_back(std::move(object)); }
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  std::chrono::milliseconds default_timeout_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<std::shared_ptr<void>> keep_alive_;
};

// A FutureWork for storage I/O (offload tiers): a wait that runs out is an IoError about the
// storage, not a CommError about peers.
class ZT_API IoWork : public FutureWork {
 public:
  using FutureWork::FutureWork;
  using FutureWork::wait;
  void wait(std::chrono::milliseconds timeout) override;
};

}  // namespace zt
