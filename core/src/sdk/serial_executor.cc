#include "zt/serial_executor.h"

#include <utility>

namespace zt {

SerialExecutor::SerialExecutor() : thread_([this] { loop(); }) {}

SerialExecutor::~SerialExecutor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SerialExecutor::submit(Task task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_all();
}

void SerialExecutor::submit(std::shared_ptr<FutureWork> work, Task task) {
  submit([work = std::move(work), task = std::move(task)] {
    try {
      task();
    } catch (...) {
      work->complete(std::current_exception());
      throw;  // retained, as any task that throws
    }
    work->complete();
  });
}

void SerialExecutor::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return queue_.empty() && !running_task_; });
}

std::vector<SerialExecutor::Task> SerialExecutor::take_retained() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(retained_, {});
}

void SerialExecutor::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Task task = std::move(queue_.front());
    queue_.pop_front();
    running_task_ = true;
    lock.unlock();
    bool failed = false;
    try {
      task();
    } catch (...) {
      failed = true;
    }
    lock.lock();
    if (failed) retained_.push_back(std::move(task));
    running_task_ = false;
    cv_.notify_all();
  }
}

}  // namespace zt
