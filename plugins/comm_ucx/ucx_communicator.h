// zt::Communicator over UCX: validates arguments on the caller's thread, then runs each
// collective on one comm thread in issue order: over a UCX-mapped shared-memory window when
// all ranks share a host (shm_collectives.h), else ring / chain algorithms (ring.h). Sums of
// bf16/fp16 accumulate in fp32; lengths that do not divide by the world size are padded.
// Destroying it is collective (a final barrier), so no rank closes while a peer still sends.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include <ATen/core/Tensor.h>

#include "ring.h"
#include "shm_collectives.h"
#include "shm_window.h"
#include "ucx_transport.h"
#include "zt/communicator.h"
#include "zt/serial_executor.h"

namespace zt::ucx {

struct CommOptions {
  TransportOptions transport;
  size_t chunk_bytes = 1 << 20;  // ring pipeline granularity
  bool shared_memory = true;     // same-host ranks use a UCX-mapped shared window
  size_t shm_bytes = 4 << 20;    // size of each data area of that window
};

class UcxCommunicator final : public Communicator {
 public:
  UcxCommunicator(const CommContext& ctx, const CommOptions& options);
  ~UcxCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return world_; }
  std::string name() const override { return "comm_ucx"; }
  std::string describe() const override;

  std::shared_ptr<Work> all_gather(const at::Tensor& out_flat, const at::Tensor& in_shard) override;
  std::shared_ptr<Work> reduce_scatter(const at::Tensor& out_shard, const at::Tensor& in_flat,
                                       ReduceOp op) override;
  std::shared_ptr<Work> all_reduce(const at::Tensor& tensor, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(const at::Tensor& tensor, int root) override;
  std::shared_ptr<Work> barrier() override;
  CommStats stats() const override;

 private:
  // Queues `body` (run on the comm thread with the op's sequence tag).
  std::shared_ptr<Work> submit(CommOp kind, uint64_t bytes, std::function<void(const OpTag&)> body);
  void run_all_gather(const OpTag& tag, at::Tensor out, at::Tensor in);
  void run_reduce_scatter(const OpTag& tag, at::Tensor out, at::Tensor in, ReduceOp op);
  void run_all_reduce(const OpTag& tag, at::Tensor tensor, ReduceOp op);

  // Scratch buffers reused across ops (comm thread only): fresh multi-MiB buffers per call
  // cost page faults that showed up as ~20% of a 16 MiB reduce_scatter.
  enum Scratch { kStage = 0, kWork, kGather, kNumScratch };
  at::Tensor scratch(Scratch slot, int64_t numel, at::ScalarType dtype);
  at::Tensor scratch_[kNumScratch];

  int rank_;
  int world_;
  std::chrono::milliseconds timeout_;
  CommOptions options_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ShmWindow> shm_window_;  // null: ranks span hosts, or shared memory is off
  std::unique_ptr<ShmCollectives> shm_;
  uint32_t next_seq_ = 0;
  mutable std::mutex stats_mutex_;
  CommStats stats_;
  std::unique_ptr<SerialExecutor> executor_;  // last member: joined first on destruction
};

}  // namespace zt::ucx
