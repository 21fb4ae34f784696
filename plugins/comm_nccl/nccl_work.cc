#include "nccl_work.h"

#include <algorithm>
#include <thread>

#include "zt/error.h"

namespace zt::nccl {

NcclWork::NcclWork(cudaEvent_t done, std::shared_ptr<NcclState> state, std::vector<at::Tensor> keep,
                   std::string what)
    : done_(done), state_(std::move(state)), keep_(std::move(keep)), what_(std::move(what)) {}

NcclWork::~NcclWork() {
  // Destroying an event whose work is still queued is allowed: CUDA releases it once it passed.
  cudaEventDestroy(done_);
}

void NcclWork::finish_locked(std::exception_ptr error) {
  completed_ = true;
  error_ = std::move(error);
  keep_.clear();
}

void NcclWork::poll_locked() {
  if (completed_) return;
  const cudaError_t query = cudaEventQuery(done_);
  if (query == cudaSuccess) {
    // An abort also lets the event pass: the op then did not happen.
    const std::string failure = state_->failure();
    finish_locked(failure.empty() ? nullptr
                                  : std::make_exception_ptr(CommError(
                                        what_ + " failed: " + failure + " (" + state_->what() +
                                        "; the communicator is unusable, restart the job)")));
    return;
  }
  if (query != cudaErrorNotReady) {
    const std::string reason = std::string("CUDA reported ") + cudaGetErrorName(query) + " (" +
                               cudaGetErrorString(query) + ") while it ran";
    (void)cudaGetLastError();  // the error is ours to report, not the next CUDA call's
    state_->fail(reason);
    finish_locked(std::make_exception_ptr(CommError(what_ + " failed: " + reason)));
    return;
  }
  const std::string failure = state_->poll_async_error();
  if (!failure.empty()) {
    finish_locked(
        std::make_exception_ptr(CommError(what_ + " failed: " + failure + " (" + state_->what() +
                                          "; the communicator is unusable, restart the job)")));
  }
}

bool NcclWork::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  poll_locked();
  return completed_;
}

void NcclWork::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(10);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      poll_locked();
      if (completed_) {
        if (error_) std::rethrow_exception(error_);
        return;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        const std::string reason = what_ + " did not complete within " +
                                   std::to_string(timeout.count()) +
                                   " ms: a peer is stalled or dead (or the stream this op was "
                                   "ordered after never finished)";
        // The op cannot be left queued against a dead peer: abort, as PyTorch's watchdog does.
        state_->fail(reason);
        finish_locked(std::make_exception_ptr(CommError(
            reason + "; the NCCL communicator of " + state_->what() +
            " was aborted and is unusable: restart the job, or raise launch.timeout_s if the "
            "peer is only slow")));
        std::rethrow_exception(error_);
      }
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(500));
  }
}

void NcclWork::wait() { wait(state_->timeout()); }

std::exception_ptr NcclWork::exception() {
  std::lock_guard<std::mutex> lock(mutex_);
  poll_locked();
  return error_;
}

}  // namespace zt::nccl
