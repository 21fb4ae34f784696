// ShardStrategy: pure layout policy. Given the tensors of one model unit, it decides how they
// are laid out in flat groups; the engine then runs one all-gather / reduce-scatter per group,
// each rank owning shard `rank` of every group. So the strategy decides how many collectives a
// unit costs and how large they are; it never touches data.
//   shard_tensor: one group per tensor (ColossalAI TensorShardStrategy).
//   shard_bucket: a unit's tensors flattened into one group, or buckets of bucket_mb
//                 (ColossalAI BucketTensorShardStrategy).
// Thread safety: plan() is const and may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zt/api.h"
#include "zt/plugin.h"

namespace zt {

// What a strategy may know of a tensor: no data.
struct TensorMeta {
  std::string name;      // e.g. "block3.attn.qkv.weight"
  int64_t numel = 0;
  int64_t element_size = 4;  // bytes per element of the flat buffers (for bucket sizing)
};

// One whole tensor placed in a group's flat buffer at [flat_offset, flat_offset + numel).
struct FlatSegment {
  int tensor = 0;            // index into the plan's input
  int64_t flat_offset = 0;
};

// One collective's worth: a flat buffer of padded_numel elements (a multiple of the world
// size, so every rank's shard has padded_numel / world elements), holding `segments` in
// order; [numel, padded_numel) is padding.
struct FlatGroup {
  int64_t numel = 0;
  int64_t padded_numel = 0;
  std::vector<FlatSegment> segments;
};

struct ShardPlan {
  std::vector<FlatGroup> groups;
};

// Checks the invariants every plan must meet (each tensor placed exactly once, no overlap,
// padding to a multiple of world); throws InternalError naming the strategy otherwise.
ZT_API void validate_plan(const ShardPlan& plan, const std::vector<TensorMeta>& tensors, int world,
                          const std::string& strategy);

class ZT_API ShardStrategy {
 public:
  virtual ~ShardStrategy();
  virtual ShardPlan plan(const std::vector<TensorMeta>& tensors, int world) const = 0;
};

// Factory of a shard plugin (kind ZT_KIND_SHARD).
class ZT_API ShardStrategyPlugin : public Plugin {
 public:
  virtual std::unique_ptr<ShardStrategy> create(const Options& options) const = 0;
};

}  // namespace zt
