#include "nccl_state.h"

#include <thread>

namespace zt::nccl {

namespace {

using Clock = std::chrono::steady_clock;

// Polls `done` with sleeps growing from 20 us to 1 ms (an NCCL call in progress usually settles
// in microseconds; a stalled one should not spin a core) until it returns true or `timeout`
// passed. Returns whether `done` did.
template <typename Done>
bool poll_until(Done done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::microseconds(20);
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  return true;
}

}  // namespace

std::string nccl_error_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = comm != nullptr ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') text += std::string(": ") + last;
  return text;
}

NcclState::NcclState(ncclComm_t comm, std::string what, std::chrono::milliseconds timeout)
    : comm_(comm), what_(std::move(what)), timeout_(timeout) {}

NcclState::~NcclState() {
  bool abort = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    abort = !failure_.empty();
    if (aborted_) return;
  }
  if (!abort) {
    // Finalize flushes the communicator's queued work; with a non-blocking communicator it
    // returns at once and ncclCommGetAsyncError says when it is done.
    ncclResult_t result = ncclCommFinalize(comm_);
    if (result == ncclInProgress || result == ncclSuccess) {
      const bool settled = poll_until(
          [&] {
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return true;
        result = state;
        return state != ncclInProgress;
          },
          timeout_);
      abort = !settled || result != ncclSuccess;
    } else {
      abort = true;
    }
  }
  if (abort) {
    ncclCommAbort(comm_);
  } else {
    ncclCommDestroy(comm_);
  }
}

std::string NcclState::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

std::string NcclState::poll_async_error() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.empty()) return failure_;
  }
  ncclResult_t state = ncclSuccess;
  const ncclResult_t asked = ncclCommGetAsyncError(comm_, &state);
  if (asked != ncclSuccess) {
    fail("NCCL could not report the communicator's state (" + nccl_error_text(asked, comm_) + ")");
  } else if (state != ncclSuccess && state != ncclInProgress) {
    fail("NCCL reported an asynchronous error (" + nccl_error_text(state, comm_) +
         "): a peer failed or the network broke");
  }
  return failure();
}

void NcclState::fail(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.empty()) failure_ = reason;
    if (aborted_) return;
    aborted_ = true;
  }
  // Outside the lock: abort waits for the communicator's kernels to leave.
  ncclCommAbort(comm_);
}

ncclResult_t NcclState::settle(ncclResult_t result, const std::string& call) {
  if (result != ncclInProgress) return result;
  const bool settled = poll_until(
      [&] {
    if (ncclCommGetAsyncError(comm_, &result) != ncclSuccess) result = ncclInternalError;
    return result != ncclInProgress;
      },
      timeout_);
  if (!settled) {
    fail(call + " was still in progress after " + std::to_string(timeout_.count()) +
         " ms (launch.timeout_s): a peer did not join it");
    return ncclInProgress;
  }
  return result;
}

}  // namespace zt::nccl
