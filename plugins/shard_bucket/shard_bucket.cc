// shard_bucket: the bucketed shard strategy (ColossalAI BucketTensorShardStrategy). A unit's
// tensors are flattened, in input order and never split, into one group (bucket_mb = 0) or into
// consecutive groups of at most bucket_mb MiB, so a unit costs one collective (or a few large
// ones) instead of one per tensor. Pure layout policy: no data is touched.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/shard_strategy.h"

namespace {

// Far above any real bucket, low enough that adding one tensor's bytes cannot overflow int64.
constexpr int64_t kMaxBucketBytes = int64_t{1} << 62;

class BucketShardStrategy final : public zt::ShardStrategy {
 public:
  // bucket_bytes == 0: one group per unit. align: every segment offset, and every rank's shard,
  // starts at a multiple of this many elements.
  BucketShardStrategy(int64_t bucket_bytes, int64_t align)
      : bucket_bytes_(bucket_bytes), align_(align) {}

  zt::ShardPlan plan(const std::vector<zt::TensorMeta>& tensors, int world) const override {
    // A bad world or tensor meta is the engine misusing the interface, not a user mistake.
    if (world < 1) {
      throw zt::InternalError("shard_bucket: plan() called with world size " +
                              std::to_string(world) + "; it must be at least 1");
    }
    zt::ShardPlan plan;
    zt::FlatGroup group;
    int64_t group_bytes = 0;  // bytes up to the end of the last segment, alignment gaps included
    for (size_t i = 0; i < tensors.size(); ++i) {
      const zt::TensorMeta& t = tensors[i];
      if (t.numel < 0 || t.element_size < 1) {
        throw zt::InternalError("shard_bucket: tensor " + t.name + " has numel " +
                                std::to_string(t.numel) + " and element_size " +
                                std::to_string(t.element_size));
      }
      int64_t offset = zt::round_up(group.numel, align_);
      int64_t bytes = (offset - group.numel + t.numel) * t.element_size;
      // Close the bucket when this tensor would overflow it. A group is never left empty, so a
      // tensor larger than a bucket still gets placed, alone: tensors are never split, since a
      // tensor's gathered view must be one contiguous range of one buffer.
      if (bucket_bytes_ > 0 && !group.segments.empty() && group_bytes + bytes > bucket_bytes_) {
        close(group, world, plan);
        group = zt::FlatGroup();
        group_bytes = 0;
        offset = 0;
        bytes = t.numel * t.element_size;
      }
      group.segments.push_back({static_cast<int>(i), offset});
      group.numel = offset + t.numel;
      group_bytes += bytes;
    }
    // No tensors, no group: an empty collective would only cost a round trip.
    if (!group.segments.empty()) close(group, world, plan);
    return plan;
  }

 private:
  // Pads the tail only, to a multiple of world * align: every rank gets an equal shard that
  // starts aligned, and the padding stays under world * align elements.
  void close(zt::FlatGroup& group, int world, zt::ShardPlan& plan) const {
    group.padded_numel = zt::round_up(group.numel, world * align_);
    plan.groups.push_back(std::move(group));
  }

  int64_t bucket_bytes_;
  int64_t align_;
};

class BucketShardPlugin final : public zt::ShardStrategyPlugin {
 public:
  std::vector<zt::OptionSpec> options() const override {
    return {
        zt::opt_double("bucket_mb", 0.0,
                       "0: one flat group per unit; else groups of at most this many MiB (whole "
                       "tensors; a larger tensor gets its own group)",
                       0.0),
        zt::opt_int("align", 1,
                    "segment offsets and each rank's shard start at a multiple of this many "
                    "elements (for vectorised kernels); costs up to align-1 padding elements per "
                    "tensor and world*align-1 per group",
                    1, 1 << 20),
    };
  }

  std::unique_ptr<zt::ShardStrategy> create(const zt::Options& options) const override {
    // The config loader has checked the ranges already; Options built by hand (tests, embedders)
    // have not, and a NaN or negative bucket would silently mean "one group".
    const double bucket_mb = options.get_double("bucket_mb");
    if (!(bucket_mb >= 0.0)) {
      throw zt::ConfigError(options.where("bucket_mb").str() + ": " + options.table() +
                            ".bucket_mb = " + std::to_string(bucket_mb) +
                            " must be a number >= 0 (0 means one flat group per unit)");
    }
    const int64_t align = options.get_int("align");
    if (align < 1) {
      throw zt::ConfigError(options.where("align").str() + ": " + options.table() +
                            ".align = " + std::to_string(align) + " must be at least 1");
    }
    int64_t bucket_bytes = 0;
    if (bucket_mb > 0.0) {
      // A tiny positive bucket must still mean "bucketed" (one tensor per group), never the
      // 0 = one-group sentinel.
      const double bytes = std::floor(bucket_mb * zt::kMiB);
      bucket_bytes = bytes >= static_cast<double>(kMaxBucketBytes)
                         ? kMaxBucketBytes
                         : std::max<int64_t>(1, static_cast<int64_t>(bytes));
    }
    return std::make_unique<BucketShardStrategy>(bucket_bytes, align);
  }
};

}  // namespace

ZT_PLUGIN(ZT_KIND_SHARD, "shard_bucket", "0.1.0",
          "tensors flattened into one group per unit or per bucket_mb (ColossalAI "
          "BucketTensorShardStrategy): few, large collectives",
          BucketShardPlugin)
