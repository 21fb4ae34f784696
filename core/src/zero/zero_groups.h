// ZeroGroups: the communicators one rank's ZeRO engine works over. Flat ZeRO shards model states
// over every rank of the job. MiCS / hpZ (DeepSpeed's mics_shard_size, FSDP's HYBRID_SHARD)
// shards them over groups of k consecutive ranks and replicates them across the world / k groups,
// so parameter gathers stay inside a group (one host) and only gradient shards cross groups:
//   shard    the k ranks of this rank's group: parameter all-gathers, gradient reduce-scatters,
//            the global gradient norm (the group's shards cover the model once)
//   replica  the world / k ranks that hold the same shard as this one, one per group: the
//            all-reduce of gradient shards; null when there is one group
//   world    every rank: anything about the whole job (its averages, broadcasts, agreements)
//   gather   what parameter all-gathers go over: shard, or with hierarchical gather and a group
//            that spans hosts, a two-level gather (across hosts, then within each host)
// With k = world (or 0) shard is the job's communicator itself: flat ZeRO, op for op.
// Building one is collective over the world (it splits it). Thread safety: the training thread.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zt/communicator.h"

namespace zt {

struct ZeroGroupOptions {
  int shard_size = 0;                // k: ranks per shard group; 0 or -1 = every rank (flat)
  bool hierarchical_gather = false;  // two-level parameter gather for groups spanning hosts
  int ranks_per_host = 0;            // consecutive ranks that share a host; 0 = unknown
};

class ZeroGroups {
 public:
  // Throws ConfigError when k does not divide the world size, or hierarchical gather is asked
  // for a group that spans hosts without ranks_per_host dividing k.
  ZeroGroups(Communicator& world, ZeroGroupOptions options);
  ~ZeroGroups();
  ZeroGroups(const ZeroGroups&) = delete;
  ZeroGroups& operator=(const ZeroGroups&) = delete;

  Communicator& world() const { return world_; }
  Communicator& shard() const { return *shard_; }
  Communicator* replica() const { return replica_.get(); }
  Communicator& gather() const { return gather_ ? *gather_ : *shard_; }
  // Groups holding the same shards (world / k), and this rank's group among them.
  int replicas() const { return world_.size() / shard_->size(); }
  int replica_index() const { return world_.rank() / shard_->size(); }
  // One line for run summaries: "flat over 4 ranks" or the groups and how gathers go.
  std::string describe() const;
  // Throws ConfigError unless every communicator here moves tensors of `device`, where the
  // engine keeps its buffers: a collective on another device's tensor fails only at its first
  // call, deep in a step, and on one rank's thread of a backward.
  void check_device(c10::Device device) const;
  // Counters of the communicators split off the world, by role ("shard group", "replica
  // group", "two-level gather"); empty when flat.
  std::vector<std::pair<std::string, CommStats>> split_stats() const;

 private:
  Communicator& world_;
  std::unique_ptr<Communicator> owned_shard_;  // null when shard_ is the world
  Communicator* shard_;
  std::unique_ptr<Communicator> replica_;
  std::unique_ptr<Communicator> gather_;  // the two-level gather, or null
};

}  // namespace zt
