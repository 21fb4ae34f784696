// ShardStrategy: pure layout policy. Given the tensors of one model unit, it decides how they
// are laid out in flat groups; the engine then runs one all-gather / reduce-scatter per group,
// each rank owning shard `rank` of every group. So the strategy decides how many collectives a
// unit costs and how large they are; it never touches data.
//   shard_tensor: one group per tensor (ColossalAI TensorShardStrategy).
//   shard_bucket: a unit's tensors flattened into one group, or buckets of bucket_mb
//                 (ColossalAI BucketTensorShardStrategy).
//
// Thread safety: create() and plan() are const and may be called from any thread; a strategy
// keeps no mutable state.
//
// THE PLAN RULES (what a third-party strategy must produce; validate_plan() checks 1-5):
//
//  1. Every input tensor is placed exactly once: in one segment of one group. A tensor is
//     never split across segments or groups (its gathered view is one contiguous range).
//     -> "tensor <name> is placed <k> times"; a segment's `tensor` outside [0, tensors.size())
//        -> "unknown tensor index".
//  2. Segments of a group are listed in increasing flat_offset and do not overlap: the first
//     starts at offset >= 0 and each next one at or after the end (flat_offset + numel) of the
//     one before. Which tensors share a group, and their order, is the strategy's choice
//     (input order is not required).
//     -> "segments overlap or are out of order in group <g>".
//  3. Gaps are allowed: before the first segment, between segments (e.g. for alignment) and
//     after the last one up to `numel`. Gap elements belong to no parameter (they start as
//     zeros and get zero gradients); they are gathered, reduced and held in every buffer like
//     parameter elements, so they cost memory and bandwidth, not correctness.
//     The last segment ends at or before `numel`.
//     -> "group <g> holds more than its numel".
//  4. padded_numel >= numel and padded_numel is a multiple of `world`; [numel, padded_numel) is
//     padding (treated like gaps). Rank r owns elements [r*s, (r+1)*s), s = padded_numel / world.
//     Extra padding beyond the next multiple of `world` is allowed (shard_bucket's `align` uses
//     it so that every shard starts aligned).
//     -> "group <g> is not padded to a multiple of <world>" (also for world <= 0).
//  5. Empty groups are allowed: a group without segments, or of numel / padded_numel 0 (as
//     shard_tensor gives a 0-element tensor). Each group still costs its collectives (of 0
//     elements), so a strategy should not make them without a reason. A unit with no tensors
//     may return no groups.
//  6. The plan is a pure function of (tensors, world, the plugin's options). Every rank plans
//     on its own and the ranks' collectives are matched group by group, so ranks that got
//     different plans would exchange the wrong bytes. Nothing checks this rule: keep plan()
//     deterministic (no clocks, no randomness, no per-rank input).
//
// What the strategy is given:
//   - plan() is called once per unit, in model order, when the engine is built, with the
//     parameters that unit OWNS, in the order the unit lists them (Unit::parameters()). The
//     engine deduplicates parameters by tensor identity and the first unit listing a tensor
//     owns it, so a tied tensor (GPT's token embedding used again by the LM head) reaches only
//     its owning unit's plan; a unit that only borrows tensors gets an empty list. At stage 3 a
//     borrowing unit gathers the whole owner's group holding the tensor, so grouping a tied
//     tensor with others makes the borrower gather those too.
//   - element_size is the bytes per element of the flat buffers (the compute dtype's size,
//     the same for every tensor of a run), for sizing buckets in bytes.
//   - At stage 3 the engine keeps a group gathered between uses when its largest tensor has
//     fewer than zero.param_persistence_threshold elements, so grouping decides persistence too.
//
// Who validates: the engine calls validate_plan() on every plan right after plan() returns,
// before it allocates anything. A broken plan stops the job with InternalError
// "shard strategy of unit <unit name> made an invalid plan: <which rule, the group index or
// tensor name>" (exit code 7). Call validate_plan() in your strategy's own tests.
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
  std::string name;          // as its unit lists it, e.g. "block3.attn.qkv.weight"
  int64_t numel = 0;         // >= 0; 0-element tensors occur
  int64_t element_size = 4;  // bytes per element of the flat buffers (for bucket sizing)
};

// One whole tensor placed in a group's flat buffer at [flat_offset, flat_offset + numel).
struct FlatSegment {
  int tensor = 0;           // index into the plan's input `tensors`
  int64_t flat_offset = 0;  // in elements, from the start of the group's flat buffer
};

// One collective's worth: a flat buffer of padded_numel elements (a multiple of the world
// size, so every rank's shard has padded_numel / world elements), holding `segments` in
// increasing flat_offset; [numel, padded_numel) is padding.
struct FlatGroup {
  int64_t numel = 0;         // >= the end of the last segment
  int64_t padded_numel = 0;  // >= numel, a multiple of world
  std::vector<FlatSegment> segments;
};

struct ShardPlan {
  std::vector<FlatGroup> groups;  // in the order the engine issues their collectives
};

// Checks rules 1-5 above.
//   plan:     in, what ShardStrategy::plan returned.
//   tensors:  in, the list that was passed to plan().
//   world:    in, the world size that was passed to plan().
//   strategy: in, inserted after "shard strategy " in the message (the engine passes
//             "of unit <unit name>").
// Throws InternalError "shard strategy <strategy> made an invalid plan: <why>" on the first
// broken rule. Pure; any thread.
ZT_API void validate_plan(const ShardPlan& plan, const std::vector<TensorMeta>& tensors, int world,
                          const std::string& strategy);

class ZT_API ShardStrategy {
 public:
  virtual ~ShardStrategy();
  // Lays out one unit's tensors.
  //   tensors: in, the unit's owned parameters (see above); may be empty.
  //   world:   in, the number of ranks, >= 1 (the engine never passes less).
  //   returns: a plan meeting the rules above.
  // Throws InternalError for input the engine never passes (world < 1, numel < 0), naming the
  // plugin and the value. Must not depend on anything but its arguments and options (rule 6).
  virtual ShardPlan plan(const std::vector<TensorMeta>& tensors, int world) const = 0;
};

// Factory of a shard plugin (kind ZT_KIND_SHARD).
class ZT_API ShardStrategyPlugin : public Plugin {
 public:
  // Makes the strategy.
  //   options: in, the validated [plugin.<id>] table (every declared key present).
  //   returns: the strategy, never null; the engine calls it only while being built.
  // Throws ConfigError for option values its declared ranges cannot express (naming the key,
  // e.g. plugin.shard_bucket.bucket_mb, and the allowed values).
  virtual std::unique_ptr<ShardStrategy> create(const Options& options) const = 0;
};

}  // namespace zt
