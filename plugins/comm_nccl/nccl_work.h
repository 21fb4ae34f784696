// The Work of a comm_nccl collective: complete when the CUDA event recorded after the NCCL call
// on the communicator's stream has passed, i.e. on the GPU. wait() blocks the calling thread
// until then, bounded: past the timeout, or when NCCL reports an asynchronous error, the
// communicator is aborted (its kernels end, so no stream stays blocked on a dead peer) and
// wait() throws a CommError naming the op. The op's tensors are held until it completes.
#pragma once

#include <cuda_runtime_api.h>

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl_state.h"
#include "zt/work.h"

namespace zt::nccl {

class NcclWork final : public Work {
 public:
  //   done:   in, recorded on the communicator's stream after the op; owned from here on.
  //   state:  in, the communicator's shared state (to poll for and report failures).
  //   keep:   in, the op's tensors, released once it completed.
  //   what:   in, names the op in messages ("comm_nccl all_gather #3 (4.0 MiB) on rank 0").
  NcclWork(cudaEvent_t done, std::shared_ptr<NcclState> state, std::vector<at::Tensor> keep,
           std::string what);
  ~NcclWork() override;

  bool is_completed() override;
  void wait(std::chrono::milliseconds timeout) override;
  void wait() override;
  std::exception_ptr exception() override;

 private:
  // Looks at the event and the communicator once; completes the Work if either says so.
  // Caller holds mutex_.
  void poll_locked();
  void finish_locked(std::exception_ptr error);

  std::mutex mutex_;
  cudaEvent_t done_;
  std::shared_ptr<NcclState> state_;
  std::vector<at::Tensor> keep_;
  std::string what_;
  bool completed_ = false;
  std::exception_ptr error_;
};

}  // namespace zt::nccl
