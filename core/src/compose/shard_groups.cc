// shard_groups: [zero]'s MiCS group size resolved against the world and the ranks per host.
#include <string>

#include "zt/error.h"
#include "zt/host/compose.h"

namespace zt {

namespace {

// The two-level gather splits a shard group that spans hosts into the ranks at one place on each
// host and each host's ranks: its ranks per host must divide the group (12 ranks, 4 to a host,
// groups of 6 cannot be split so).
void check_two_level(const EngineSettings& settings, const ShardGroupChoice& c, int world) {
  const int k = c.sharding_world(world), per_host = c.ranks_per_host;
  if (!c.hierarchical || per_host <= 0 || per_host >= k || k % per_host == 0) return;
  throw ConfigError(settings.places.where("zero.mics_hierarchical_params_gather") +
                    ": zero.mics_hierarchical_params_gather = true gathers a shard group of " +
                    std::to_string(k) + " ranks in two levels, but its hosts hold " +
                    std::to_string(per_host) +
                    " ranks each, which does not divide it; make zero.mics_shard_size a "
                    "multiple of the ranks per host, or set "
                    "zero.mics_hierarchical_params_gather = false");
}

}  // namespace

ShardGroupChoice shard_groups(const EngineSettings& settings, int world, int ranks_per_host) {
  const ShardGroupRequest& asked = settings.groups;
  const std::string where = settings.places.where(asked.key) + ": " + asked.key + " = " +
                            std::to_string(asked.size);
  ShardGroupChoice c;
  c.ranks_per_host = ranks_per_host;
  c.hierarchical = asked.hierarchical;
  if (asked.size < 0) {
    check_two_level(settings, c, world);
    return c;
  }
  int64_t k = asked.size;
  if (k == 0) {
    if (ranks_per_host <= 0) {
      throw ConfigError(where + " asks for the ranks of one host, but the launcher did not say "
                                "how many that is (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE "
                                "or SLURM_NTASKS_PER_NODE); set the group size as a number");
    }
    k = ranks_per_host;
  }
  if (k > world || world % k != 0) {
    throw ConfigError(where +
                      (asked.size == 0 ? " (" + std::to_string(k) + " ranks per host)" : "") +
                      " does not divide the job's " + std::to_string(world) +
                      " ranks; use a divisor of the world size, or -1 to shard over every rank");
  }
  c.size = k == world ? 0 : static_cast<int>(k);
  check_two_level(settings, c, world);
  return c;
}

}  // namespace zt
