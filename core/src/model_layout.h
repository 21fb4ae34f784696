// ModelLayout: where every parameter of a model lives in the engine's flat buffers. Each unit's
// own parameters (a tensor listed by two units is owned by the first, by tensor identity) are
// laid out in groups by the ShardStrategy; each group is one flat buffer in the compute dtype
// whose slices the parameters become, so one collective moves a whole group and freeing the
// buffer's storage frees every tensor in it. Rank r owns elements [r * shard, (r + 1) * shard)
// of every group once stage >= 1.
// Thread safety: one thread (the training thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "zt/shard_strategy.h"
#include "zt/unit.h"

namespace zt {

struct ParamSlot {
  std::string name;
  at::Tensor tensor;  // the unit's own parameter; a view into its group's flat buffer once built
  int group = -1;
  int64_t offset = 0;  // elements into the group's flat buffer
};

// The flat-buffer positions [first, second) of `slot`'s group that lie in [begin, end) and belong
// to the parameter (empty when second <= first): what a rank holding or saving that range has of
// it.
inline std::pair<int64_t, int64_t> param_overlap(const ParamSlot& slot, int64_t begin,
                                                 int64_t end) {
  return {std::max(begin, slot.offset), std::min(end, slot.offset + slot.tensor.numel())};
}

struct ParamGroup {
  std::vector<int> params;  // indices into ModelLayout::params, in flat-offset order
  int64_t numel = 0;        // elements the parameters cover
  int64_t padded = 0;       // the buffer's length: a multiple of the world size
  int64_t shard = 0;        // elements each rank owns (stage 0: all of them)
  int64_t first = 0;        // this rank's first owned element
  bool persistent = true;   // stage 3: never released (or not stage 3)
  at::Tensor flat;          // compute dtype, `padded` elements, once built
};

class ModelLayout {
 public:
  // Registers the units' parameters and asks `strategy` for each unit's groups; a plan that
  // breaks the rules (validate_plan) is an InternalError naming the strategy and the unit.
  // `element_size` is the compute dtype's, for bucket sizing.
  ModelLayout(const std::vector<Unit*>& units, const ShardStrategy& strategy, int world_size,
              int64_t bytes_per_element);

  // Sizes the shards: this rank's slice when `sharded` (stage >= 1), the whole group otherwise.
  // Groups whose every tensor is smaller than `persistence_threshold` stay gathered in stage 3.
  void size_shards(bool sharded, int rank, bool stage3, int64_t persistence_threshold);

  // Builds group `g`'s flat buffer in `dtype` from the parameters' current values and turns
  // every parameter into a view of it. Returns the same values in fp32 (the masters' source).
  at::Tensor build_flat(int g, at::ScalarType dtype);

  // Copies the group's .grad tensors into one flat buffer (zeros where a parameter got none,
  // and in the padding), divided by `predivide`, and frees the .grad tensors.
  at::Tensor take_flat_grads(int g, at::ScalarType dtype, double predivide);

  // Bytes of the largest unit's groups (owned and borrowed) in the compute dtype.
  int64_t largest_unit_bytes() const;
  bool unit_uses(int unit, int group) const;

  std::vector<ParamSlot> params;
  std::vector<ParamGroup> groups;
  std::vector<std::vector<int>> unit_groups;  // groups each unit uses, owned and borrowed
  int64_t element_size;
  int world;
};

// Frees (bytes = 0) or re-materialises a flat buffer's storage in place: its views, autograd's
// saved references included, stay valid and see the new bytes.
void resize_flat_storage(const at::Tensor& flat, int64_t bytes);

}  // namespace zt
