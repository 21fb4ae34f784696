// One background thread that runs submitted tasks in submission order: how comm plugins make
// collectives asynchronous while keeping the issue order every rank agrees on.
// A task that throws is retained (not destroyed) until the executor is destroyed, because a
// failed collective may still have transfers in flight into the buffers its closure owns.
// Thread safety: submit() may be called from any thread; the destructor drains the queue.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "zt/api.h"
#include "zt/work.h"

namespace zt {

class ZT_API SerialExecutor {
 public:
  using Task = std::function<void()>;
  SerialExecutor();
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  // Tasks report their own outcome (e.g. through a FutureWork); exceptions that escape a task
  // mark it retained and are otherwise swallowed.
  void submit(Task task);
  // Runs `task` as above, then completes `work`: with the exception that escaped the task, else
  // with success, unless the task completed it already (FutureWork keeps its first result). The
  // form to use for an op whose task may throw: with the plain submit, `work` never completed,
  // and its waiters timed out blaming the peers.
  void submit(std::shared_ptr<FutureWork> work, Task task);
  // Blocks until every task submitted so far has run.
  void drain();
  // The failed tasks retained so far, now the caller's: an owner that must release what they
  // hold only after its transport is closed (the transfers that may still write into it are
  // cancelled there) takes them before destroying the executor.
  std::vector<Task> take_retained();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool running_task_ = false;
  bool stop_ = false;
  std::vector<Task> retained_;
  std::thread thread_;
};

}  // namespace zt
