#include "setup/shard_groups.h"

#include <string>

#include "zt/error.h"

namespace zt::trainer {

ShardGroupChoice shard_group_choice(const Config& config, int world, int ranks_per_host) {
  const Options& zero = config.section("zero");
  const char* key = zero.is_set("shard_group_size") && !zero.is_set("mics_shard_size")
                        ? "shard_group_size"
                        : "mics_shard_size";
  const int64_t asked = zero.get_int(key);
  const std::string where = zero.where(key).str() + ": zero." + key + " = " + std::to_string(asked);
  ShardGroupChoice c;
  c.ranks_per_host = ranks_per_host;
  c.hierarchical = zero.get_bool("mics_hierarchical_params_gather");
  if (asked < 0) return c;
  int64_t k = asked;
  if (k == 0) {
    if (ranks_per_host <= 0) {
      throw ConfigError(where + " asks for the ranks of one host, but the launcher did not say "
                                "how many that is (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE "
                                "or SLURM_NTASKS_PER_NODE); set the group size as a number");
    }
    k = ranks_per_host;
  }
  if (k > world || world % k != 0) {
    throw ConfigError(where + (asked == 0 ? " (" + std::to_string(k) + " ranks per host)" : "") +
                      " does not divide the job's " + std::to_string(world) +
                      " ranks; use a divisor of the world size, or -1 to shard over every rank");
  }
  c.size = k == world ? 0 : static_cast<int>(k);
  return c;
}

}  // namespace zt::trainer
