#include "zero/offload_placement.h"

#include <algorithm>
#include <numeric>

namespace zt {

namespace {

// Marks eligible groups in order until `fraction` of the eligible bytes is placed.
template <typename Eligible>
std::vector<bool> place_share(const std::vector<PlacementGroup>& groups, double fraction,
                              double bytes_per_element, Eligible eligible) {
  std::vector<bool> placed_here(groups.size(), false);
  double total = 0, placed = 0;
  for (const auto& g : groups) {
    if (eligible(g)) total += static_cast<double>(g.shard) * bytes_per_element;
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    if (!eligible(groups[i]) || fraction <= 0 || placed >= fraction * total - 0.5) continue;
    placed_here[i] = true;
    placed += static_cast<double>(groups[i].shard) * bytes_per_element;
  }
  return placed_here;
}

}  // namespace

OffloadPlacement place_offload(const std::vector<PlacementGroup>& groups,
                               const PlacementRequest& r) {
  OffloadPlacement out;
  out.optimizer_in_tier.assign(groups.size(), false);
  out.param_in_tier.assign(groups.size(), false);
  const int64_t states = r.optimizer_arrays - 1;
  if (r.optimizer_tier) {
    const double bytes_per_element = static_cast<double>(r.master_element_size +
                                                         states * r.state_element_size);
    out.optimizer_in_tier = place_share(groups, r.optimizer_fraction, bytes_per_element,
                                        [](const PlacementGroup& g) { return g.shard > 0; });
  }
  if (r.param_tier) {
    out.param_in_tier = place_share(
        groups, r.param_fraction, static_cast<double>(r.param_element_size),
        [](const PlacementGroup& g) { return g.shard > 0 && !g.persistent; });
  }
  int64_t largest = 0, granule = 1;
  for (size_t i = 0; i < groups.size(); ++i) {
    const int64_t shard = groups[i].shard;
    if (out.optimizer_in_tier[i]) {
      out.optimizer_tier_bytes +=
          round_up(shard * r.master_element_size, r.optimizer_alignment) +
          (r.grads_in_tier ? round_up(shard * 4, r.optimizer_alignment) : 0) +
          states * round_up(shard * r.state_element_size, r.optimizer_alignment);
      largest = std::max(largest, shard);
    }
    if (out.param_in_tier[i]) {
      out.param_tier_bytes += round_up(shard * r.param_element_size, r.param_alignment);
      largest = std::max(largest, shard);
    }
  }
  // A tile is fp32 (gradient), the master's or the states' dtype or the compute dtype
  // (parameters): its start must be aligned in the narrowest of them, and fall on the 8-byte
  // words a tiered array's checksums sum over (a tier may declare an alignment under 8: each
  // tile's sum then covered other words than the whole array's, and every read back "differed").
  const int64_t narrowest = std::min<int64_t>(
      {r.param_element_size, r.master_element_size, states > 0 ? r.state_element_size : 4});
  const auto granule_of = [&](int64_t alignment) {
    return std::lcm(std::max<int64_t>(alignment, 1), int64_t{8}) / narrowest;
  };
  if (r.optimizer_tier) granule = std::max(granule, granule_of(r.optimizer_alignment));
  if (r.param_tier) granule = std::max(granule, granule_of(r.param_alignment));
  out.tile_elements = round_up(std::max<int64_t>(1, std::min(r.sub_group_size, largest)), granule);
  return out;
}

}  // namespace zt
