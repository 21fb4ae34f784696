// Communicator: collectives between the ranks of a job, supplied by a comm plugin (comm_ucx, or
// examples/plugin_template's comm_local). Semantics follow c10d: every rank issues the same ops,
// with the same sizes and dtypes, in the same order; each op returns a Work handle at once and
// ops complete in issue order.
//
// Flat sharding convention (used by all_gather and reduce_scatter): a flat tensor of L elements
// is split into world-size shards like torch.chunk: shard r covers [r*c, min(L, (r+1)*c)) with
// c = ceil(L / world). So L need not divide by the world size and trailing shards may be empty.
// See flat_shard(). (The engine always passes lengths that divide by the world size.)
//
// Buffers: tensors are contiguous; an op keeps references to its tensors until it completes
// (even when it failed), and the caller must not write an input or read an output before
// Work::wait() returned.
//
// Errors, in two places:
//   - at the call, synchronously: arguments the plugin cannot take. Tensors of a device or dtype
//     it does not support are InternalError "<plugin> does not support ..."; mismatched sizes,
//     dtypes or undefined tensors are InternalError naming the op and both sizes.
//   - from Work::wait(): the op failed between ranks (a dead or silent peer, a timeout): a
//     CommError naming the op, the rank waited for and the way out. After one failure the
//     communicator is unusable: every later op fails with CommError.
//
// Thread safety: a Communicator is driven from one thread (issue order is the contract); its
// Work handles may be waited on from any thread. rank(), size(), name(), describe() and stats()
// may be called from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "zt/api.h"
#include "zt/plugin.h"
#include "zt/work.h"

namespace at {
class Tensor;
}

namespace zt {

class Store;

// kAvg is the sum divided by the world size.
enum class ReduceOp { kSum, kAvg, kMax, kMin };
// "sum", "avg", "max", "min". Never throws.
ZT_API const char* reduce_op_name(ReduceOp op);

enum class CommOp { kAllGather = 0, kReduceScatter, kAllReduce, kBroadcast, kBarrier, kAllToAll };
constexpr int kNumCommOps = 6;
// "all_gather", "reduce_scatter", ... Never throws.
ZT_API const char* comm_op_name(CommOp op);

// Counters per op kind since the communicator was created.
struct CommStats {
  struct PerOp {
    uint64_t calls = 0;
    uint64_t bytes = 0;       // logical payload: the flat tensor's bytes (out of all_gather,
                              // in of reduce_scatter and all_to_all, the tensor of all_reduce /
                              // broadcast)
    uint64_t wire_bytes = 0;  // bytes this rank sent to peers
  };
  std::array<PerOp, kNumCommOps> ops;
  const PerOp& operator[](CommOp op) const { return ops[static_cast<int>(op)]; }
  PerOp& operator[](CommOp op) { return ops[static_cast<int>(op)]; }
};

// total += more, op by op (counters of several communicators together). Never throws.
ZT_API void add_stats(CommStats& total, const CommStats& more);

// The half-open element range [begin, end) of shard `rank` of a flat tensor of `numel`
// elements split over `world` ranks (torch.chunk convention, see above). Pure; never throws.
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
ZT_API ShardRange flat_shard(int64_t numel, int world, int rank);
// ceil(numel / world): the padded shard length every rank uses on the wire.
ZT_API int64_t padded_shard_numel(int64_t numel, int world);

// What the engine issues, so a plugin knows what it must take (run.task = "smoke" checks each):
// all_gather, reduce_scatter and all_reduce (kSum, kAvg) of the compute and master dtypes
// (fp32, bf16, fp16) and fp64; all_reduce kMax and kMin of fp32 and fp64 (the ranks' agreements
// and step totals); all_gather of int64 (exchange_split, step traces) and of bytes (the weight
// codec's coded gathers); broadcast of what the engine keeps; all_to_all of bytes only for a
// gradient codec.
class ZT_API Communicator {
 public:
  // Collective for comm_ucx (a barrier, so no peer still sends to a closed endpoint); it must
  // not throw: a peer already gone is tolerated.
  virtual ~Communicator();
  // This process's rank, in [0, size()). Never throws.
  virtual int rank() const = 0;
  // The number of ranks, >= 1. Never throws.
  virtual int size() const = 0;
  // A name for messages: the plugin id. Never throws.
  virtual std::string name() const = 0;
  // One line on how data moves (transport, algorithm), for run summaries. Never throws.
  virtual std::string describe() const { return name(); }
  // The device whose tensors the data ops take (host memory: the CPU). The engine keeps its
  // buffers there and makes its small control tensors there (the step's gradient totals). The
  // default is the CPU. Never throws.
  virtual c10::Device device() const;

  // Gathers every rank's shard into one flat tensor on every rank.
  //   out_flat: out, L elements; on completion the concatenation of all ranks' in_shard.
  //   in_shard: in, this rank's shard: flat_shard(L, size(), rank()).size() elements (0 for a
  //             trailing empty shard), same dtype and device as out_flat. It may be a view
  //             into out_flat at exactly its own place (an in-place gather, as the engine issues
  //             at stages 1-2): a plugin must handle that; other overlaps are not allowed.
  //   returns: the op's Work, never null.
  // Requires: every rank calls with the same L and dtype, at the same place in issue order.
  // Throws InternalError at the call for bad arguments (see above); CommError from wait().
  virtual std::shared_ptr<Work> all_gather(const at::Tensor& out_flat,
                                           const at::Tensor& in_shard) = 0;
  // Reduces flat tensors across ranks and leaves each rank its shard of the result.
  //   out_shard: out, flat_shard(L, size(), rank()).size() elements, same dtype and device as
  //              in_flat; on completion `op` over all ranks' in_flat, restricted to this shard.
  //   in_flat:   in, L elements; not modified.
  //   op:        in, the reduction. 16-bit float types may be reduced in fp32 and rounded once.
  //   returns: the op's Work, never null.
  // Requires: as all_gather. Throws: as all_gather (a dtype the plugin cannot reduce included).
  virtual std::shared_ptr<Work> reduce_scatter(const at::Tensor& out_shard,
                                               const at::Tensor& in_flat, ReduceOp op) = 0;
  // In place: tensor = op over all ranks' tensor.
  //   tensor: in/out, any length, the same on every rank.
  //   op:     in, the reduction.
  //   returns: the op's Work, never null. Throws: as all_gather.
  virtual std::shared_ptr<Work> all_reduce(const at::Tensor& tensor, ReduceOp op) = 0;
  // In place: tensor = root's tensor.
  //   tensor: in on the root, out on the others; the same length and dtype on every rank.
  //   root:   in, the rank whose tensor is sent, in [0, size()), the same on every rank.
  //   returns: the op's Work, never null. Throws: as all_gather.
  virtual std::shared_ptr<Work> broadcast(const at::Tensor& tensor, int root) = 0;
  // Exchanges blocks between every pair of ranks (MPI_Alltoall): `in` holds size() blocks of
  // equal length, block d for rank d; on completion block s of `out` is rank s's block for this
  // rank (block rank() is copied across). Moves bytes: any dtype a plugin can move.
  //   out: out, the same length and dtype as `in`, not overlapping it.
  //   in:  in, size() * B elements for one B >= 0, the same B on every rank.
  //   returns: the op's Work, never null.
  // Requires: as all_gather. Throws: as all_gather. A plugin that has no all-to-all keeps this
  // default, which throws ConfigError "<name> does not support all_to_all" at the call (only
  // the engine's gradient codecs need it, so it is a configuration that cannot work).
  virtual std::shared_ptr<Work> all_to_all(const at::Tensor& out, const at::Tensor& in);
  // Completes on a rank once every rank has issued it (and everything issued before it).
  //   returns: the op's Work, never null. Throws CommError from wait() only.
  virtual std::shared_ptr<Work> barrier() = 0;

  // Counters per op kind since creation: calls and logical bytes are counted when an op is
  // issued, wire bytes as they are sent. Never throws; any thread.
  virtual CommStats stats() const = 0;

  // Splits the ranks of this communicator into disjoint sub-communicators, like MPI_Comm_split
  // and ncclCommSplit. Collective: every rank of this communicator calls it, at the same place
  // in issue order (comm_split.h's exchange_split all-gathers the colors and keys with it).
  //   color: in, >= 0: the ranks passing the same color form one new communicator;
  //          kSplitNoColor: this rank joins none.
  //   key:   in, orders the ranks of a new communicator (ties: by rank in this one).
  //   returns: this rank's new communicator, with rank() its place by key, its own counters
  //            and its own issue order; null for kSplitNoColor.
  // A sub-communicator may share this one's connections and progress thread (comm_ucx does):
  // then ops of every communicator of the family run one at a time, and every rank must issue
  // them in the same relative order (a program that drives all of them from one thread in the
  // same sequence on every rank does). Either may be destroyed first.
  // Throws InternalError for a color < kSplitNoColor; CommError as any collective.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
};

// The color of a rank that joins no new communicator in Communicator::split.
constexpr int kSplitNoColor = -1;

// For the small tensors a job keeps on the host to agree on something (flags, totals, a debug
// read, an exchange of small records): all_reduce / broadcast / all_gather run where `comm`
// moves tensors (Communicator::device()), then wait. A communicator of the CPU takes the host
// tensors themselves; another gets copies on its device, and the result is copied back into
// the host tensor (comm_nccl refuses host tensors).
//   host, out_host: in/out, a tensor in host memory, as the op requires it.
//   in_host: in, all_gather's shard in host memory.
// Throws what the op and Work::wait throw.
ZT_API void all_reduce_host(Communicator& comm, const at::Tensor& host, ReduceOp op);
ZT_API void broadcast_host(Communicator& comm, const at::Tensor& host, int root);
ZT_API void all_gather_host(Communicator& comm, const at::Tensor& out_host,
                            const at::Tensor& in_host);

// What a comm plugin gets to build a communicator.
struct CommContext {
  int rank = 0;                               // this process's rank, 0..world-1
  int world = 1;                              // number of ranks
  int local_rank = 0;                         // rank among the processes on this host
  Store* store = nullptr;                     // rendezvous store shared by all ranks (non-owning)
  std::string store_prefix;                   // prefix for this communicator's keys in the store
  std::chrono::milliseconds timeout{300000};  // bound on every wait, rendezvous included
};

// Factory of a comm plugin (kind ZT_KIND_COMM).
class ZT_API CommunicatorPlugin : public Plugin {
 public:
  // Builds this rank's communicator. Collective: every rank of `ctx` calls it, and it returns
  // once the ranks are connected (addresses exchanged through ctx.store under ctx.store_prefix).
  //   options: in, the validated [plugin.<id>] table (every declared key present).
  //   ctx:     in, this rank's place in the job, the store and the bound on every wait; the
  //            store outlives the communicator.
  //   returns: a ready communicator with rank() == ctx.rank and size() == ctx.world; never null.
  // Throws CommError when peers cannot be reached within ctx.timeout (naming the rank or key
  // waited for), or a world size the plugin cannot serve; ConfigError for option values only
  // known to be wrong here (e.g. a transport list UCX refuses); InternalError for a null store.
  // Thread safety: const; may be called from any thread, once per communicator.
  virtual std::unique_ptr<Communicator> create(const Options& options,
                                               const CommContext& ctx) const = 0;
};

}  // namespace zt
