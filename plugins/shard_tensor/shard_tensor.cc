// shard_tensor: the per-tensor shard strategy (ColossalAI TensorShardStrategy). Every tensor of a
// unit is its own flat group, padded to a multiple of the world size, so a unit of T tensors
// costs T collectives, each the size of one tensor. Pure layout policy: no data is touched.
#include <memory>
#include <string>
#include <vector>

#include "zt/error.h"
#include "zt/shard_strategy.h"

namespace {

class TensorShardStrategy final : public zt::ShardStrategy {
 public:
  zt::ShardPlan plan(const std::vector<zt::TensorMeta>& tensors, int world) const override {
    // A bad world or a negative size is the engine misusing the interface, not a user mistake.
    if (world < 1) {
      throw zt::InternalError("shard_tensor: plan() called with world size " +
                              std::to_string(world) + "; it must be at least 1");
    }
    zt::ShardPlan plan;
    plan.groups.reserve(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const int64_t numel = tensors[i].numel;
      if (numel < 0) {
        throw zt::InternalError("shard_tensor: tensor " + tensors[i].name + " has numel " +
                                std::to_string(numel));
      }
      zt::FlatGroup group;
      group.numel = numel;
      // Smallest multiple of world that holds the tensor: every rank's shard is equal, and the
      // padding is under one element per rank. An empty tensor keeps its own empty group so the
      // plan stays one group per tensor, index for index.
      group.padded_numel = (numel + world - 1) / world * world;
      group.segments.push_back({static_cast<int>(i), 0});
      plan.groups.push_back(std::move(group));
    }
    return plan;
  }
};

class TensorShardPlugin final : public zt::ShardStrategyPlugin {
 public:
  // Nothing to tune: the layout follows from the tensors alone.
  std::vector<zt::OptionSpec> options() const override { return {}; }

  std::unique_ptr<zt::ShardStrategy> create(const zt::Options&) const override {
    return std::make_unique<TensorShardStrategy>();
  }
};

}  // namespace

ZT_PLUGIN(ZT_KIND_SHARD, "shard_tensor", "0.1.0",
          "one flat group per tensor (ColossalAI TensorShardStrategy): one collective per tensor",
          TensorShardPlugin)
