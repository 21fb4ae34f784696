#include "zero/zero_groups.h"

#include "zero/hierarchical_gather.h"
#include "zt/error.h"

namespace zt {

ZeroGroups::ZeroGroups(Communicator& world, ZeroGroupOptions options)
    : world_(world), shard_(&world) {
  const int n = world.size(), r = world.rank();
  // 0 is flat ZeRO here; -1, the config's spelling of it (compose maps it to 0), too.
  const int k = options.shard_size == 0 || options.shard_size == -1 ? n : options.shard_size;
  if (k < 1 || n % k != 0) {
    throw ConfigError("zero.mics_shard_size = " + std::to_string(k) +
                      " does not divide the job's " + std::to_string(n) +
                      " ranks; use a divisor of the world size (the ranks of one host are the "
                      "usual group), or -1 to shard over every rank");
  }
  if (k < n) {
    // Groups of k consecutive ranks shard; the ranks at the same place in every group replicate.
    owned_shard_ = world.split(r / k, r);
    shard_ = owned_shard_.get();
    replica_ = world.split(r % k, r);
  }
  const int per_host = options.ranks_per_host;
  if (options.hierarchical_gather && per_host > 0 && per_host < k) {
    gather_ = std::make_unique<HierarchicalGather>(*shard_, per_host);
  }
}

ZeroGroups::~ZeroGroups() = default;

void ZeroGroups::check_device(c10::Device device) const {
  for (const Communicator* comm : {&world_, shard_, replica_.get(), gather_.get()}) {
    if (comm == nullptr || comm->device() == device) continue;
    throw ConfigError("comm plugin " + comm->name() + " moves tensors on " + comm->device().str() +
                      " but the engine keeps its buffers on " + device.str() +
                      ": choose a comm plugin for " + device.str() +
                      " (plugins.comm: comm_ucx moves host memory, comm_nccl a GPU's)");
  }
}

std::string ZeroGroups::describe() const {
  const int n = world_.size(), k = shard_->size();
  std::string out;
  if (k == n) {
    out = "flat: states sharded over all " + std::to_string(n) + " ranks";
    if (gather_) out += "; parameter gathers in two levels, " + gather_->describe();
    return out;
  }
  out = "MiCS: states sharded over groups of " + std::to_string(k) +
        " consecutive ranks, replicated " + std::to_string(n / k) +
        " times; gradient shards all-reduced across the groups. shard group: " +
        shard_->describe() + "; replica group: " + replica_->describe();
  if (gather_) out += "; parameter gathers in two levels, " + gather_->describe();
  return out;
}

std::vector<std::pair<std::string, CommStats>> ZeroGroups::split_stats() const {
  std::vector<std::pair<std::string, CommStats>> out;
  if (owned_shard_) out.emplace_back("shard group", owned_shard_->stats());
  if (replica_) out.emplace_back("replica group", replica_->stats());
  if (gather_) {
    out.emplace_back("two-level gather",
                     static_cast<const HierarchicalGather&>(*gather_).level_stats());
  }
  return out;
}

}  // namespace zt
