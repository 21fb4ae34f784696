#include "zt/work.h"

#include "zt/error.h"

namespace zt {

Work::~Work() = default;

FutureWork::FutureWork(std::string what, std::chrono::milliseconds default_timeout)
    : what_(std::move(what)), default_timeout_(default_timeout) {}

FutureWork::~FutureWork() = default;

bool FutureWork::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void FutureWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!done_cv_.wait_for(lock, timeout, [this] { return done_; })) {
    throw CommError(what_ + " did not complete within " + std::to_string(timeout.count()) +
                    " ms; a peer may have died or stalled (raise launch.timeout_s if the job is "
                    "just slow)");
  }
  if (error_) std::rethrow_exception(error_);
}

void FutureWork::wait() { wait(default_timeout_); }

std::exception_ptr FutureWork::exception() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void IoWork::wait(std::chrono::milliseconds timeout) {
  try {
    FutureWork::wait(timeout);
  } catch (const CommError&) {
    if (is_completed()) {
      // It finished between the timeout and here: its own failure (a storage error it met just
      // then), not the timeout's CommError; or nothing, when it succeeded.
      if (const std::exception_ptr failure = exception()) std::rethrow_exception(failure);
      return;
    }
    throw IoError(what() + " did not complete within " + std::to_string(timeout.count()) +
                  " ms: the storage stopped answering; check the device (dmesg) or move the "
                  "offload path to another disk");
  }
}

void FutureWork::complete(std::exception_ptr error) {
  std::vector<std::function<void(bool)>> callbacks;
  const bool failed = error != nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;  // the first result stands
    done_ = true;
    error_ = std::move(error);
    callbacks.swap(callbacks_);
  }
  done_cv_.notify_all();
  for (auto& fn : callbacks) fn(failed);
}

void FutureWork::on_complete(std::function<void(bool failed)> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_) {
      callbacks_.push_back(std::move(fn));
      return;
    }
  }
  fn(exception() != nullptr);
}

CompletedWork::CompletedWork(std::exception_ptr error) : error_(std::move(error)) {}

bool CompletedWork::is_completed() { return true; }

void CompletedWork::wait(std::chrono::milliseconds) { wait(); }

void CompletedWork::wait() {
  if (error_) std::rethrow_exception(error_);
}

std::exception_ptr CompletedWork::exception() { return error_; }

std::shared_ptr<Work> run_now(const std::function<void()>& body) {
  try {
    body();
  } catch (...) {
    return std::make_shared<CompletedWork>(std::current_exception());
  }
  return std::make_shared<CompletedWork>();
}

}  // namespace zt
