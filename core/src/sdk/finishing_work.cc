#include "sdk/finishing_work.h"

#include <mutex>
#include <utility>

namespace zt {

namespace {

class FinishingWork final : public Work {
 public:
  FinishingWork(std::shared_ptr<Work> inner, std::function<void()> finish)
      : inner_(std::move(inner)), finish_(std::move(finish)) {}

  bool is_completed() override { return inner_->is_completed(); }
  void wait(std::chrono::milliseconds timeout) override {
    inner_->wait(timeout);
    finish_once();
  }
  void wait() override {
    inner_->wait();
    finish_once();
  }
  std::exception_ptr exception() override {
    if (std::exception_ptr e = inner_->exception()) return e;
    const std::lock_guard<std::mutex> lock(mutex_);
    return finish_error_;
  }

 private:
  void finish_once() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (finish_) {
      try {
        finish_();
      } catch (...) {
        finish_error_ = std::current_exception();
      }
      finish_ = nullptr;  // lets go of what it held
    }
    if (finish_error_) std::rethrow_exception(finish_error_);
  }

  std::shared_ptr<Work> inner_;
  std::mutex mutex_;
  std::function<void()> finish_;  // null once it ran
  std::exception_ptr finish_error_;
};

}  // namespace

std::shared_ptr<Work> finishing_work(std::shared_ptr<Work> inner, std::function<void()> finish) {
  return std::make_shared<FinishingWork>(std::move(inner), std::move(finish));
}

}  // namespace zt
