// Offload placement: which groups' model states go to an offload tier, as a pure function of
// their sizes and the configured fractions (ColossalAI Gemini's static placement): groups in
// model order until that share of the bytes is placed. It also says how many bytes each role
// will hold in its tier (each array rounded up to the tier's alignment), so the tier can refuse
// a full disk before training, and how long a streamed tile is.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "zt/bytes.h"

namespace zt {

struct PlacementGroup {
  int64_t shard = 0;        // elements this rank owns
  bool persistent = false;  // stage 3 keeps it gathered: its parameter shard never moves
};

struct PlacementRequest {
  bool optimizer_tier = false;      // plugins.offload_optimizer set (stages 1-3)
  double optimizer_fraction = 1;    // zero.offload_optimizer_fraction
  int64_t optimizer_arrays = 1;     // arrays per element the fraction weighs: the master + each
                                    // state (the tier also holds the group's fp32 gradient)
  int64_t master_element_size = 4;  // bytes per element of the master weights (bf16: 2)
  int64_t state_element_size = 4;   // bytes per element of each optimizer state (bf16: 2)
  int64_t optimizer_alignment = 1;  // the tier's alignment in bytes
  // The group's reduced fp32 gradient lives in the optimizer tier too; false where the step waits
  // for the global norm with gradients in host memory (streamed_gradients_in_memory).
  bool grads_in_tier = true;
  bool param_tier = false;    // plugins.offload_param set (stage 3)
  double param_fraction = 1;  // zero.offload_param_fraction
  int64_t param_alignment = 1;
  int64_t param_element_size = 4;       // the compute dtype's bytes per element
  int64_t sub_group_size = 1000000000;  // zero.sub_group_size: longest streamed tile, elements
};

struct OffloadPlacement {
  std::vector<bool> optimizer_in_tier;  // per group: master + states in the optimizer tier
  std::vector<bool> param_in_tier;      // per group: the stage 3 parameter shard in the param tier
  // What each role will hold in its tier. A group in the optimizer tier keeps optimizer_arrays
  // arrays there, master and states, and its reduced fp32 gradient where grads_in_tier, each
  // rounded up alone.
  int64_t optimizer_tier_bytes = 0;
  int64_t param_tier_bytes = 0;
  // Streamed tile length: sub_group_size capped by the largest offloaded shard, rounded up so
  // every tile starts at a byte offset each tier can take (O_DIRECT alignment).
  int64_t tile_elements = 1;
};

OffloadPlacement place_offload(const std::vector<PlacementGroup>& groups,
                               const PlacementRequest& request);

}  // namespace zt
