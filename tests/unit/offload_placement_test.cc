// place_offload (core/src/zero/offload_placement.h): which groups' states go to a tier, by the
// configured fraction of the bytes in model order, what each tier must hold, and the tile length.
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "zero/offload_placement.h"

namespace {

std::vector<zt::PlacementGroup> equal_groups(int n, int64_t shard) {
  return std::vector<zt::PlacementGroup>(static_cast<std::size_t>(n),
                                         zt::PlacementGroup{shard, false});
}

int count(const std::vector<bool>& v) {
  int n = 0;
  for (bool b : v) n += b ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("no tier: nothing placed, nothing needed") {
  const auto p = zt::place_offload(equal_groups(3, 100), {});
  CHECK(count(p.optimizer_in_tier) == 0);
  CHECK(count(p.param_in_tier) == 0);
  CHECK(p.optimizer_tier_bytes == 0);
  CHECK(p.param_tier_bytes == 0);
  CHECK(p.tile_elements == 1);
}

TEST_CASE("fractions place groups in model order until that share of the bytes is placed") {
  zt::PlacementRequest r;
  r.optimizer_tier = true;
  r.optimizer_arrays = 3;
  for (double fraction : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    r.optimizer_fraction = fraction;
    const auto p = zt::place_offload(equal_groups(4, 100), r);
    CAPTURE(fraction);
    CHECK(count(p.optimizer_in_tier) == static_cast<int>(fraction * 4));
    // A prefix of the model: the first groups go, the rest stay.
    for (int i = 0; i < count(p.optimizer_in_tier); ++i)
      CHECK(p.optimizer_in_tier[static_cast<std::size_t>(i)]);
    // Master, 2 states and the group's fp32 gradient.
    CHECK(p.optimizer_tier_bytes == count(p.optimizer_in_tier) * (3 + 1) * 100 * 4);
  }
  // An uneven split: the group that crosses the share goes too (placed < share before it).
  r.optimizer_fraction = 0.3;
  const auto p = zt::place_offload({{100, false}, {300, false}, {100, false}}, r);
  CHECK(p.optimizer_in_tier == std::vector<bool>{true, true, false});
  // Gradients waiting for the norm in host memory: the tier is asked for master and states
  // alone (it was asked for 4 bytes per element it never got, and a disk that fits was refused).
  r.optimizer_fraction = 1;
  r.grads_in_tier = false;
  CHECK(zt::place_offload(equal_groups(4, 100), r).optimizer_tier_bytes == 4 * 3 * 100 * 4);
}

TEST_CASE("parameter shards: only groups that are released between uses, and never empty shards") {
  zt::PlacementRequest r;
  r.param_tier = true;
  r.param_element_size = 2;
  const auto p = zt::place_offload({{50, true}, {0, false}, {70, false}}, r);
  CHECK(p.param_in_tier == std::vector<bool>{false, false, true});
  CHECK(p.param_tier_bytes == 140);
  CHECK(count(p.optimizer_in_tier) == 0);
}

TEST_CASE("tier bytes round every array up to the tier's alignment") {
  zt::PlacementRequest r;
  r.optimizer_tier = true;
  r.optimizer_arrays = 3;
  r.optimizer_alignment = 4096;
  r.param_tier = true;
  r.param_alignment = 512;
  r.param_element_size = 2;
  const auto p = zt::place_offload({{1000, false}, {3, false}}, r);
  CHECK(p.optimizer_tier_bytes == (3 + 1) * (4096 + 4096));  // 4000 B and 12 B arrays
  CHECK(p.param_tier_bytes == 2048 + 512);                   // 2000 B and 6 B shards
}

TEST_CASE(
    "tile length: sub_group_size capped by the largest offloaded shard, aligned for every tier") {
  zt::PlacementRequest r;
  r.optimizer_tier = true;
  r.optimizer_alignment = 4096;
  r.param_element_size = 4;
  r.sub_group_size = 10000;
  // fp32: 4096-byte alignment is 1024 elements.
  CHECK(zt::place_offload(equal_groups(2, 5000), r).tile_elements == 5120);
  CHECK(zt::place_offload(equal_groups(2, 100000), r).tile_elements == 10240);
  // 16-bit parameters in the param tier: tiles start where both element sizes are aligned.
  r.param_tier = true;
  r.param_alignment = 4096;
  r.param_element_size = 2;
  CHECK(zt::place_offload(equal_groups(2, 100000), r).tile_elements == 10240);
  r.sub_group_size = 1;
  CHECK(zt::place_offload(equal_groups(2, 100000), r).tile_elements == 2048);
  // Nothing placed (fraction 0): the tile length still has a sane minimum.
  r.optimizer_fraction = 0;
  r.param_fraction = 0;
  CHECK(zt::place_offload(equal_groups(2, 100000), r).tile_elements == 2048);
  // A tier that declares an alignment under 8 bytes: tiles still fall on 8-byte words of every
  // array (the tiered arrays' checksums sum words), here 4 elements of the 16-bit parameters.
  r.optimizer_fraction = 1;
  r.param_fraction = 1;
  r.optimizer_alignment = 1;
  r.param_alignment = 2;
  r.sub_group_size = 3;
  const int64_t tile = zt::place_offload(equal_groups(2, 101), r).tile_elements;
  CHECK(tile == 4);
  CHECK(tile * r.param_element_size % 8 == 0);
}
