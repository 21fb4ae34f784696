// What a comm_nccl communicator and its Work handles share: the NCCL communicator itself, its
// health, and the one place that aborts it. A Work can outlive its communicator (dropping a
// handle never cancels an op), so the NCCL communicator is destroyed when the last owner goes.
#pragma once

#include <nccl.h>

#include <chrono>
#include <mutex>
#include <string>

namespace zt::nccl {

// "ncclSystemError: <NCCL's last error>" for messages. Never throws.
std::string nccl_error_text(ncclResult_t result, ncclComm_t comm);

class NcclState {
 public:
  //   comm:    in, an initialised communicator; owned from here on.
  //   what:    in, names it in messages ("comm_nccl rank 1 of 2 on cuda:1").
  //   timeout: in, the bound on every wait, the destructor's finalisation included.
  NcclState(ncclComm_t comm, std::string what, std::chrono::milliseconds timeout);
  // Finalises the communicator (waits, bounded, for its queued work), then destroys it; one
  // that failed, was aborted or did not finalise in time is aborted instead. Never throws.
  ~NcclState();
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;

  ncclComm_t comm() const { return comm_; }
  const std::string& what() const { return what_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // The error an earlier failure left (empty while healthy). Any thread.
  std::string failure() const;
  // Checks NCCL's asynchronous error of the communicator (a peer that failed, a network error);
  // the first one found is kept as the failure and the communicator aborted. Returns the
  // failure, empty while healthy. Any thread.
  std::string poll_async_error();
  // Marks the communicator failed with `reason` (the first reason wins) and aborts it, which
  // ends its kernels still running or queued, so no stream stays blocked on a dead peer. Any
  // thread; idempotent.
  void fail(const std::string& reason);

  // Waits while NCCL reports a non-blocking call as in progress, up to the timeout. A call
  // still in progress then fails the communicator. Returns NCCL's final result for the call.
  ncclResult_t settle(ncclResult_t result, const std::string& call);

 private:
  mutable std::mutex mutex_;
  ncclComm_t comm_;
  std::string what_;
  std::chrono::milliseconds timeout_;
  std::string failure_;
  bool aborted_ = false;
};

}  // namespace zt::nccl
