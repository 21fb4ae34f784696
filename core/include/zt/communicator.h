// Communicator: collectives between the ranks of a job, supplied by a comm plugin (comm_ucx,
// comm_nccl). Semantics follow c10d: every rank issues the same ops in the same order; each op
// returns a Work handle; ops complete in issue order.
//
// Flat sharding convention (used by all_gather and reduce_scatter): a flat tensor of L elements
// is split into world-size shards like torch.chunk: shard r covers [r*c, min(L, (r+1)*c)) with
// c = ceil(L / world). So L need not divide by the world size and trailing shards may be empty.
// See flat_shard(). Tensors must be contiguous; dtypes and devices a plugin cannot handle fail
// with "<plugin> does not support ...".
//
// Thread safety: a Communicator is driven from one thread (issue order is the contract); its
// Work handles may be waited on from any thread. stats() may be read from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "zt/api.h"
#include "zt/plugin.h"
#include "zt/work.h"

namespace at {
class Tensor;
}

namespace zt {

class Store;

enum class ReduceOp { kSum, kAvg, kMax, kMin };
ZT_API const char* reduce_op_name(ReduceOp op);

enum class CommOp { kAllGather = 0, kReduceScatter, kAllReduce, kBroadcast, kBarrier };
constexpr int kNumCommOps = 5;
ZT_API const char* comm_op_name(CommOp op);

// Counters per op kind since the communicator was created.
struct CommStats {
  struct PerOp {
    uint64_t calls = 0;
    uint64_t bytes = 0;       // logical payload: the flat tensor's bytes (out of all_gather,
                              // in of reduce_scatter, the tensor of all_reduce / broadcast)
    uint64_t wire_bytes = 0;  // bytes this rank sent to peers
  };
  std::array<PerOp, kNumCommOps> ops;
  const PerOp& operator[](CommOp op) const { return ops[static_cast<int>(op)]; }
  PerOp& operator[](CommOp op) { return ops[static_cast<int>(op)]; }
};

// The half-open element range [begin, end) of shard `rank` of a flat tensor of `numel`
// elements split over `world` ranks (torch.chunk convention, see above).
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
ZT_API ShardRange flat_shard(int64_t numel, int world, int rank);
// ceil(numel / world): the padded shard length every rank uses on the wire.
ZT_API int64_t padded_shard_numel(int64_t numel, int world);

class ZT_API Communicator {
 public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A name for messages: the plugin id.
  virtual std::string name() const = 0;
  // One line on how data moves (transport, algorithm), for run summaries.
  virtual std::string describe() const { return name(); }

  // out_flat (L elements) = concatenation of every rank's in_shard (flat_shard(L, size, r)).
  virtual std::shared_ptr<Work> all_gather(const at::Tensor& out_flat,
                                           const at::Tensor& in_shard) = 0;
  // out_shard = this rank's shard (flat_shard) of op over all ranks' in_flat.
  virtual std::shared_ptr<Work> reduce_scatter(const at::Tensor& out_shard,
                                               const at::Tensor& in_flat, ReduceOp op) = 0;
  // In place: tensor = op over all ranks' tensor.
  virtual std::shared_ptr<Work> all_reduce(const at::Tensor& tensor, ReduceOp op) = 0;
  // In place: tensor = root's tensor.
  virtual std::shared_ptr<Work> broadcast(const at::Tensor& tensor, int root) = 0;
  virtual std::shared_ptr<Work> barrier() = 0;

  virtual CommStats stats() const = 0;
};

// What a comm plugin gets to build a communicator.
struct CommContext {
  int rank = 0;                    // this process's rank, 0..world-1
  int world = 1;                   // number of ranks
  int local_rank = 0;              // rank among the processes on this host
  Store* store = nullptr;          // rendezvous store shared by all ranks (non-owning)
  std::string store_prefix;        // prefix for this communicator's keys in the store
  std::chrono::milliseconds timeout{300000};  // bound on every wait, rendezvous included
};

// Factory of a comm plugin (kind ZT_KIND_COMM).
class ZT_API CommunicatorPlugin : public Plugin {
 public:
  // Collective over all ranks of `ctx` (each rank calls it); throws CommError on failure.
  virtual std::unique_ptr<Communicator> create(const Options& options,
                                               const CommContext& ctx) const = 0;
};

}  // namespace zt
