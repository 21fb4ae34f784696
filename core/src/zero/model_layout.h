// ModelLayout: where every parameter of a model lives in the engine's flat buffers. Each unit's
// own parameters (a tensor listed by two units is owned by the first, by tensor identity) are
// laid out in groups by the ShardStrategy; each group is one flat buffer in the compute dtype
// whose slices the parameters become, so one collective moves a whole group and freeing the
// buffer's storage frees every tensor in it. Rank r owns elements [r * shard, (r + 1) * shard)
// of every group once stage >= 1.
// The layout comes either from units that exist (their tensors hold the initial values) or from a
// ModelSource's declarations, before any unit exists (partitioned construction: the initial
// values are then computed for just the elements a rank keeps; attach() hands over each unit's
// tensors once it is built).
// Thread safety: one thread (the training thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "zt/model_source.h"
#include "zt/shard_strategy.h"
#include "zt/unit.h"

namespace zt {

struct ParamSlot {
  std::string name;
  // The unit's own parameter; a view into its group's flat buffer once built (empty while a
  // stage-3 group is released: read `shape` and `numel`, not its sizes). Undefined until its
  // unit is attached when the layout came from declarations.
  at::Tensor tensor;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  std::optional<ParamInit> init;  // declared initialiser; none: the tensor's values are initial
  int group = -1;
  int64_t offset = 0;  // elements into the group's flat buffer
  // Stages 0-1 with 16-bit compute and grad_accum > 1: the finished micro steps' gradients,
  // summed in fp32 (flattened). Autograd summed them into the 16-bit .grad, where a micro step's
  // gradient below half a spacing of the sum was lost; stages 2-3 sum reduced parts in fp32.
  at::Tensor grad_sum;
};

// One parameter a unit lists, as the layout registers it. Parameters with the same key are one
// tensor (owned by the first unit that lists it): tensor identity for built units, the name for
// declarations.
struct ParamEntry {
  std::string key;
  std::string name;
  std::vector<int64_t> shape;
  std::optional<ParamInit> init;
  at::Tensor tensor;  // built units only
};
using UnitEntries = std::vector<ParamEntry>;

// Entries of units that exist (identity keys, their tensors' values are the initial ones).
std::vector<UnitEntries> entries_of_units(const std::vector<Unit*>& units);
// Entries of a source's declarations (name keys, declared initialisers), no unit built.
std::vector<UnitEntries> entries_of_source(const ModelSource& source);

// The flat-buffer positions [first, second) of `slot`'s group that lie in [begin, end) and belong
// to the parameter (empty when second <= first): what a rank holding or saving that range has of
// it.
inline std::pair<int64_t, int64_t> param_overlap(const ParamSlot& slot, int64_t begin,
                                                 int64_t end) {
  return {std::max(begin, slot.offset), std::min(end, slot.offset + slot.numel)};
}

struct ParamGroup {
  std::vector<int> params;  // indices into ModelLayout::params, in flat-offset order
  int64_t numel = 0;        // elements the parameters cover
  int64_t padded = 0;       // the buffer's length: a multiple of the world size
  int64_t shard = 0;        // elements each rank owns (stage 0: all of them)
  int64_t first = 0;        // this rank's first owned element
  bool persistent = true;   // stage 3: never released (or not stage 3)
  int unit = 0;             // the unit that owns its parameters
  at::Tensor flat;          // compute dtype, `padded` elements, once built
  // Ranges [first, second) of `flat` whose parameters take no weight decay
  // (zero.no_weight_decay): sorted, disjoint, adjacent ones merged (weight_decay_runs.h).
  std::vector<std::pair<int64_t, int64_t>> decay_free;
};

class ModelLayout {
 public:
  // Registers the units' parameters and asks `strategy` for each unit's groups; a plan that
  // breaks the rules (validate_plan) is an InternalError naming the strategy and the unit.
  // `element_size` is the compute dtype's, for bucket sizing.
  ModelLayout(const std::vector<Unit*>& units, const ShardStrategy& strategy, int world_size,
              int64_t bytes_per_element);
  // The same from entries; `labels` name each unit in messages; `seed` is the declared
  // initialisers' (unused for built units).
  ModelLayout(const std::vector<UnitEntries>& units, const std::vector<std::string>& labels,
              const ShardStrategy& strategy, int world_size, int64_t bytes_per_element,
              uint64_t seed);

  // Takes over the tensors of unit `u`, built after the layout came from declarations: its
  // parameters() must list the declared names and shapes in order, a borrowed one being the very
  // tensor its owner listed. Throws InternalError naming the unit and the tensor otherwise.
  void attach(int u, Unit& unit);
  // Writes the initial values of group `g`'s elements [begin, begin + out.numel()) into `out`
  // (fp32, contiguous; padding is left as it is): declared initialisers for just those elements,
  // else the tensors' current values.
  void fill_initial(int g, int64_t begin, const at::Tensor& out) const;
  // Points every parameter of group `g` into its flat buffer (set_data, so the tensor objects
  // and their version counters stay).
  void bind_views(int g);
  // Makes every parameter of group `g` empty (shape [0]) while its buffer holds no bytes, as
  // DeepSpeed's and FSDP's released parameters are: a read outside its unit then sees an empty
  // tensor, and a computation with it fails on the shape, where the full shape over a freed
  // buffer read through a null pointer. ParamSlot::shape keeps the real one; bind_views restores
  // it.
  void empty_views(int g);

  // Sizes the shards: this rank's slice when `sharded` (stage >= 1), the whole group otherwise.
  // Groups whose every tensor is smaller than `persistence_threshold` stay gathered in stage 3.
  void size_shards(bool sharded, int rank, bool stage3, int64_t persistence_threshold);

  // Builds group `g`'s flat buffer in `dtype` from the parameters' current values and turns
  // every parameter into a view of it. Returns the same values in fp32 (the masters' source).
  at::Tensor build_flat(int g, at::ScalarType dtype);

  // Copies the group's .grad tensors into one flat buffer (zeros where a parameter got none,
  // and in the padding), divided by `predivide`, and frees the .grad tensors.
  at::Tensor take_flat_grads(int g, at::ScalarType dtype, double predivide);
  // Moves every parameter's .grad into its fp32 grad_sum (stages 0-1, after each micro step of
  // a 16-bit job that accumulates), leaving .grad empty for the next.
  void fold_grads_into_fp32();

  // Bytes of the largest unit's groups (owned and borrowed) in the compute dtype.
  int64_t largest_unit_bytes() const;
  bool unit_uses(int unit, int group) const;

  std::vector<ParamSlot> params;
  std::vector<ParamGroup> groups;
  std::vector<std::vector<int>> unit_groups;  // groups each unit uses, owned and borrowed
  int64_t element_size;
  int world;
  uint64_t seed = 0;
  std::vector<std::string> unit_labels;
  bool from_declarations = false;  // no tensors yet: attach() each unit once it is built

 private:
  void add_unit(int u, const UnitEntries& entries, const ShardStrategy& strategy);
  // Registration key -> parameter index (a map: a model has thousands of parameters).
  std::unordered_map<std::string, int> index_of_key_;
};

// Frees (bytes = 0) or re-materialises a flat buffer's storage in place: its views, autograd's
// saved references included, stay valid and see the new bytes. Only an empty storage is filled
// (no bytes are carried over; InternalError otherwise), from the storage's own allocator, so a
// buffer on any device is served.
void resize_flat_storage(const at::Tensor& flat, int64_t bytes);

}  // namespace zt
