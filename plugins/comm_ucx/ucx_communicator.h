// zt::Communicator over UCX: validates arguments on the caller's thread, then runs each
// collective on one comm thread in issue order: over a UCX-mapped shared-memory window when
// all ranks share a host (shm_collectives.h), else ring / chain algorithms (ring.h). Sums of
// bf16/fp16 accumulate in fp32; lengths that do not divide by the world size are padded.
// split() makes sub-communicators that share the parent's CommFamily: its UCX worker and
// endpoints (no new connections) and its comm thread; each maps its own shared-memory window
// when its members share a host (its flags count its own rounds), and keeps its own counters.
// Destroying one is collective over its ranks (a final barrier), so no rank closes while a peer
// still sends.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

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

// What a communicator and every communicator split from it share. The transport is used only
// on the comm thread (executor), which runs the ops of the whole family one at a time.
struct CommFamily {
  CommFamily(const CommContext& ctx, const CommOptions& options);
  ~CommFamily();
  Store* store;
  std::chrono::milliseconds timeout;
  CommOptions options;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<SerialExecutor> executor;  // joined before the transport goes
  // Scratch buffers a failed op used (comm thread only): transfers cancelled but maybe not yet
  // finished may still write there, so they go only after the transport, as failed ops' tensors.
  std::vector<at::Tensor> failed_buffers;
};

class UcxCommunicator final : public Communicator {
 public:
  // The job's communicator: connects every rank of `ctx` (a new CommFamily).
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
  std::shared_ptr<Work> all_to_all(const at::Tensor& out, const at::Tensor& in) override;
  std::shared_ptr<Work> barrier() override;
  CommStats stats() const override;
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  // A sub-communicator over `group` (transport ranks of the family), keys under `prefix`.
  UcxCommunicator(std::shared_ptr<CommFamily> family, Group group, std::string prefix);
  // Maps the shared-memory window when enabled and every member can reach every other's
  // segment. Collective over the members; runs on the comm thread (UCX is single-threaded).
  void open_window();
  // Runs `fn` on the comm thread after everything issued before it, and waits for it.
  void on_comm_thread(const std::function<void()>& fn);
  // Queues `body` (run on the comm thread with the op's sequence tag).
  std::shared_ptr<Work> submit(CommOp kind, uint64_t bytes, std::function<void(const OpTag&)> body);
  void run_all_gather(const OpTag& tag, at::Tensor out, at::Tensor in);
  void run_reduce_scatter(const OpTag& tag, at::Tensor out, at::Tensor in, ReduceOp op);
  void run_all_reduce(const OpTag& tag, at::Tensor tensor, ReduceOp op);

  // Scratch buffers reused across ops (comm thread only): fresh multi-MiB buffers per call
  // cost page faults that showed up as ~20% of a 16 MiB reduce_scatter.
  enum Scratch { kStage = 0, kWork, kGather, kNumScratch };
  at::Tensor scratch(Scratch slot, int64_t numel, at::ScalarType dtype);
  // After a failed op: its scratch goes to the family (failed_buffers), fresh buffers follow.
  void keep_scratch_until_closed();
  at::Tensor scratch_[kNumScratch];

  std::shared_ptr<CommFamily> family_;
  Transport& transport_;  // the family's
  CommOptions options_;   // the family's
  Group group_;
  std::string prefix_;  // store keys of this communicator (its window, its splits)
  int rank_;
  int world_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<ShmWindow> shm_window_;  // null: ranks span hosts, or shared memory is off
  std::unique_ptr<ShmCollectives> shm_;
  uint32_t next_index_ = 0;  // ops submitted so far: the next one's number
  int splits_ = 0;           // split() calls so far: names the store keys of each split's children
  mutable std::mutex stats_mutex_;
  CommStats stats_;
};

}  // namespace zt::ucx
