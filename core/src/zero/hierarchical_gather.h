// HierarchicalGather (mics_hierarchical_params_gather): a shard group's parameter all-gather in
// two levels when the group spans hosts. First across hosts, among the ranks at the same place on
// their host (each host pair exchanges one shard per place instead of a ring through every rank
// of the group), then within each host, where shared memory is fast. The result is the flat
// all-gather's, bit for bit (the blocks are only moved); every other op goes to the flat shard
// communicator.
// The second level can only start once the first has landed, and every rank must issue ops in
// one order, so it is issued when the gather is waited for, in issue order (a wait first starts
// the second level of every earlier gather). Hence: wait on the thread that issues ops (the
// engine's training thread), and wait for every gather before destroying this.
// Thread safety: as a Communicator driven from one thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <deque>
#include <memory>
#include <mutex>

#include "zt/codec.h"
#include "zt/communicator.h"

namespace zt {

class HierarchicalGather final : public Communicator {
 public:
  // Collective over `shard` (it splits it). `ranks_per_host` consecutive ranks of it share a
  // host and divide its size. `shard` outlives this.
  HierarchicalGather(Communicator& shard, int ranks_per_host);
  ~HierarchicalGather() override;

  int rank() const override { return shard_.rank(); }
  int size() const override { return shard_.size(); }
  std::string name() const override { return shard_.name(); }
  std::string describe() const override;
  c10::Device device() const override { return shard_.device(); }

  std::shared_ptr<Work> all_gather(const at::Tensor& out_flat,
                                   const at::Tensor& in_shard) override {
    return gather(out_flat, in_shard, nullptr);
  }
  // As all_gather with the first level (across hosts) on `codec`'s encoding (coded_collectives.h):
  // the shards cross the link encoded, every rank decodes them alike, and the second level moves
  // the decoded values within each host, exactly.
  std::shared_ptr<Work> coded_all_gather(const at::Tensor& out_flat, const at::Tensor& in_shard,
                                         const Codec& codec) {
    return gather(out_flat, in_shard, &codec);
  }
  std::shared_ptr<Work> reduce_scatter(const at::Tensor& out_shard, const at::Tensor& in_flat,
                                       ReduceOp op) override {
    return shard_.reduce_scatter(out_shard, in_flat, op);
  }
  std::shared_ptr<Work> all_reduce(const at::Tensor& tensor, ReduceOp op) override {
    return shard_.all_reduce(tensor, op);
  }
  std::shared_ptr<Work> broadcast(const at::Tensor& tensor, int root) override {
    return shard_.broadcast(tensor, root);
  }
  std::shared_ptr<Work> all_to_all(const at::Tensor& out, const at::Tensor& in) override {
    return shard_.all_to_all(out, in);
  }
  std::shared_ptr<Work> barrier() override { return shard_.barrier(); }
  // The shard communicator's counters, with the two levels' (level_stats) added to its own.
  CommStats stats() const override;
  // The two levels' counters together.
  CommStats level_stats() const;
  std::unique_ptr<Communicator> split(int color, int key) override {
    return shard_.split(color, key);
  }

  // One gather in flight: its first level's result, then its second's.
  struct Pending {
    at::Tensor out;
    at::Tensor across;    // hosts x c: the shards of this rank's place on every host
    at::Tensor gathered;  // ranks_per_host x hosts x c: every place's `across`
    std::shared_ptr<Work> first, second;
    bool placed = false;  // `out` written
  };
  // Starts the second level of every gather issued up to and including `p` (waiting for their
  // first levels), in issue order.
  void start_through(const Pending* p, std::chrono::milliseconds timeout);

 private:
  std::shared_ptr<Work> gather(const at::Tensor& out_flat, const at::Tensor& in_shard,
                               const Codec* codec);

  Communicator& shard_;
  int per_host_;
  int hosts_;
  std::unique_ptr<Communicator> across_;  // same place on every host, ordered by host
  std::unique_ptr<Communicator> within_;  // this host's ranks of the group
  std::mutex mutex_;
  std::deque<std::shared_ptr<Pending>> unstarted_;  // second level not issued yet
};

}  // namespace zt
