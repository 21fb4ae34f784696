// Out-of-line destructors and small helpers of the public interfaces, so their typeinfo and
// vtables live once, in libzt_core, and are shared by every plugin.
#include <algorithm>

#include "zt/codec.h"
#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/offload.h"
#include "zt/optimizer.h"
#include "zt/plugin.h"
#include "zt/shard_strategy.h"
#include "zt/store.h"
#include "zt/unit.h"

namespace zt {

Plugin::~Plugin() = default;
Store::~Store() = default;
Communicator::~Communicator() = default;
c10::Device Communicator::device() const { return c10::Device(c10::kCPU); }

std::shared_ptr<Work> Communicator::all_to_all(const at::Tensor&, const at::Tensor&) {
  // Only a gradient codec calls it: a configuration that cannot work, not a bug.
  throw ConfigError(name() +
                    " does not support all_to_all; a gradient codec (plugins.codec_gradients) "
                    "needs a comm plugin (plugins.comm) that has it, e.g. comm_ucx, or no "
                    "gradient codec");
}

void all_reduce_host(Communicator& comm, const at::Tensor& host, ReduceOp op) {
  const at::Tensor there = host.to(comm.device());
  comm.all_reduce(there, op)->wait();
  if (!there.is_same(host)) host.copy_(there);
}

void broadcast_host(Communicator& comm, const at::Tensor& host, int root) {
  const at::Tensor there = host.to(comm.device());
  comm.broadcast(there, root)->wait();
  if (!there.is_same(host)) host.copy_(there);
}

void all_gather_host(Communicator& comm, const at::Tensor& out_host, const at::Tensor& in_host) {
  const at::Tensor out = out_host.to(comm.device());
  comm.all_gather(out, in_host.to(comm.device()))->wait();
  if (!out.is_same(out_host)) out_host.copy_(out);
}

Codec::~Codec() = default;
ShardStrategy::~ShardStrategy() = default;
Optimizer::~Optimizer() = default;
OffloadTier::~OffloadTier() = default;
Unit::~Unit() = default;

void validate_plan(const ShardPlan& plan, const std::vector<TensorMeta>& tensors, int world,
                   const std::string& strategy) {
  auto fail = [&](const std::string& why) {
    throw InternalError("shard strategy " + strategy + " made an invalid plan: " + why);
  };
  std::vector<int> placed(tensors.size(), 0);
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const FlatGroup& group = plan.groups[g];
    if (group.numel < 0) fail("group " + std::to_string(g) + " has a negative element count");
    if (world <= 0 || group.padded_numel % world != 0 || group.padded_numel < group.numel) {
      fail("group " + std::to_string(g) + " is not padded to a multiple of " +
           std::to_string(world));
    }
    int64_t end = 0;
    for (const auto& seg : group.segments) {
      if (seg.tensor < 0 || seg.tensor >= static_cast<int>(tensors.size()))
        fail("unknown tensor index");
      if (seg.flat_offset < 0)
        fail("a segment of group " + std::to_string(g) + " starts before it");
      if (seg.flat_offset < end)
        fail("segments overlap or are out of order in group " + std::to_string(g));
      end = seg.flat_offset + tensors[seg.tensor].numel;
      placed[seg.tensor]++;
    }
    if (end > group.numel) fail("group " + std::to_string(g) + " holds more than its numel");
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (placed[t] != 1)
      fail("tensor " + tensors[t].name + " is placed " + std::to_string(placed[t]) + " times");
  }
}

const char* plugin_kind_name(ZtPluginKind kind) {
  // A plugin's info entry may carry any 32-bit value here, hence the fallback after the switch.
  switch (kind) {
    case ZT_KIND_COMM: return "comm";
    case ZT_KIND_SHARD: return "shard";
    case ZT_KIND_OFFLOAD: return "offload";
    case ZT_KIND_OPTIMIZER: return "optimizer";
    case ZT_KIND_MODEL: return "model";
    case ZT_KIND_CODEC: return "codec";
    case ZT_KIND_UNKNOWN: break;
  }
  return "unknown";
}

ZtPluginKind plugin_kind_from_name(const std::string& name) {
  for (ZtPluginKind k : {ZT_KIND_COMM, ZT_KIND_SHARD, ZT_KIND_OFFLOAD, ZT_KIND_OPTIMIZER,
                         ZT_KIND_MODEL, ZT_KIND_CODEC}) {
    if (name == plugin_kind_name(k)) return k;
  }
  return ZT_KIND_UNKNOWN;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::kAllGather: return "all_gather";
    case CommOp::kReduceScatter: return "reduce_scatter";
    case CommOp::kAllReduce: return "all_reduce";
    case CommOp::kBroadcast: return "broadcast";
    case CommOp::kBarrier: return "barrier";
    case CommOp::kAllToAll: return "all_to_all";
  }
  return "?";
}

void add_stats(CommStats& total, const CommStats& more) {
  for (int op = 0; op < kNumCommOps; ++op) {
    total.ops[op].calls += more.ops[op].calls;
    total.ops[op].bytes += more.ops[op].bytes;
    total.ops[op].wire_bytes += more.ops[op].wire_bytes;
  }
}

int64_t padded_shard_numel(int64_t numel, int world) {
  return world <= 0 ? 0 : (numel + world - 1) / world;
}

ShardRange flat_shard(int64_t numel, int world, int rank) {
  int64_t c = padded_shard_numel(numel, world);
  int64_t begin = std::min(numel, c * rank);
  int64_t end = std::min(numel, c * (rank + 1));
  return {begin, end};
}

}  // namespace zt
