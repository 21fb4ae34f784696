// The shard group a job asks for in [zero] (mics_shard_size, or its other name
// shard_group_size), resolved against the job's world and ranks per host. The engine shards
// over groups of that many ranks (zt/engine.h, EngineOptions::shard_group_size) and the memory
// theory divides by it instead of the world.
// Thread safety: pure functions of their arguments.
#pragma once

#include "zt/config.h"

namespace zt::trainer {

struct ShardGroupChoice {
  int size = 0;               // ranks per shard group; 0 = every rank (flat ZeRO)
  bool hierarchical = false;  // mics_hierarchical_params_gather
  int ranks_per_host = 0;     // as given (0 = unknown)
  int sharding_world(int world) const { return size > 0 ? size : world; }
};

// world: the job's ranks; ranks_per_host: ranks on one host, 0 if unknown. Throws ConfigError
// (file:line of the key) for a size that does not divide the world, exceeds it, or is 0
// ("the ranks of one host") with the ranks per host unknown or not dividing the world.
ShardGroupChoice shard_group_choice(const Config& config, int world, int ranks_per_host);

}  // namespace zt::trainer
