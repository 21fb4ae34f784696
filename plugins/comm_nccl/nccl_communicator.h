// zt::Communicator over NCCL for CUDA tensors. Each communicator owns a CUDA stream from
// LibTorch's pool on its rank's GPU; an op makes that stream wait (an event, not a host sync)
// for the work the caller's current stream has queued, so a producer's kernels finish before
// NCCL reads, then issues the NCCL call there and records a completion event that its Work
// polls. The NCCL communicator is non-blocking (ncclConfig_t::blocking = 0), so joining it,
// splitting it and every call are bounded by the job's timeout; a stalled or failed peer aborts
// it and the op's Work throws a CommError. Lengths that do not divide by the world size go
// through padded scratch buffers (NCCL's all-gather and reduce-scatter take equal counts).
#pragma once

#include <c10/cuda/CUDAStream.h>

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nccl_state.h"
#include "zt/communicator.h"

namespace zt::nccl {

struct CommOptions {
  bool high_priority_stream = true;  // the comm stream outranks compute kernels
};

class NcclCommunicator final : public Communicator {
 public:
  // The job's communicator: rank 0 makes NCCL's unique id and shares it through ctx.store;
  // every rank joins on GPU local_rank % (GPUs visible). Throws PluginError when this process
  // sees no GPU, CommError when a rank does not join within ctx.timeout or NCCL refuses
  // (two ranks on one GPU, say).
  NcclCommunicator(const CommContext& ctx, const CommOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return world_; }
  std::string name() const override { return "comm_nccl"; }
  std::string describe() const override;
  // The rank's GPU (local_rank modulo the GPUs visible): the only device its data ops take.
  c10::Device device() const override {
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_));
  }

  std::shared_ptr<Work> all_gather(const at::Tensor& out_flat, const at::Tensor& in_shard) override;
  std::shared_ptr<Work> reduce_scatter(const at::Tensor& out_shard, const at::Tensor& in_flat,
                                       ReduceOp op) override;
  std::shared_ptr<Work> all_reduce(const at::Tensor& tensor, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(const at::Tensor& tensor, int root) override;
  std::shared_ptr<Work> barrier() override;
  CommStats stats() const override;
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  // A communicator split from another (ncclCommSplit), on the same GPU.
  NcclCommunicator(ncclComm_t comm, int device, const CommOptions& options,
                   std::chrono::milliseconds timeout);

  // Checks a tensor an op takes: defined, contiguous, on this communicator's GPU, a dtype NCCL
  // reduces (`reduce`) or any NCCL dtype. Throws InternalError naming the op.
  void check_tensor(const char* op, const char* role, const at::Tensor& t, bool reduce) const;
  // Orders the comm stream after the caller's current stream, runs `body` on the comm stream
  // (the NCCL call through call(), and any copies), records the completion event and returns
  // the Work. A failure (this op's, or an earlier one's: the communicator is then unusable)
  // comes back as a Work whose wait() throws the CommError.
  std::shared_ptr<Work> issue(CommOp op, uint64_t bytes, uint64_t wire_bytes,
                              std::vector<at::Tensor> keep,
                              const std::function<void(const std::string& what)>& body);
  // Settles a non-blocking NCCL call; throws CommError (the communicator failed) unless it
  // succeeded.
  void call(ncclResult_t result, const std::string& what);
  std::string op_name(CommOp op, uint64_t bytes) const;

  CommOptions options_;
  int rank_ = 0;
  int world_ = 1;
  int device_ = 0;
  std::chrono::milliseconds timeout_{300000};
  std::shared_ptr<NcclState> state_;
  std::optional<c10::cuda::CUDAStream> stream_;
  at::Tensor barrier_flag_;  // one int32 on the GPU, all-reduced by barrier()
  uint64_t next_seq_ = 0;
  mutable std::mutex stats_mutex_;
  CommStats stats_;
};

}  // namespace zt::nccl
