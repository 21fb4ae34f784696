// Engine::with_gathered_parameters (DeepSpeed's GatheredParameters): the fp32 masters of named
// parameters, whole on every rank, handed to a caller's function; with a modifier rank, that
// rank's values afterwards broadcast and written into every rank's held part of the masters
// (in memory or a tier, through ShardIo) and into the parameter copies the engine computes with:
// stages 0-2 the flat buffer (every rank writes the whole parameter, so no all-gather follows),
// stage 3 the parameter shard (memory or its tier) and, while its group is gathered, the flat
// buffer. Only the named parameters' bytes move, so editing tensors one at a time (model.init_from)
// costs the model once, not once per tensor. Optimizer states are left as they are.
// Thread safety: one thread (the training thread). Collective: every rank passes the same names
// and modifier rank.
#pragma once

#include <string>
#include <vector>

#include "engine/engine_parts.h"
#include "zt/host/engine.h"

namespace zt {

// See Engine::with_gathered_parameters. Arguments are checked on every rank before any
// collective (ConfigError for an unknown or repeated name, or a modifier rank outside
// [-1, world)). With a modifier rank, the ranks agree after `fn` whether it failed anywhere (or
// the modifier's tensors no longer fit their parameters, InternalError): then nothing is written
// on any rank, the failing rank throws its own error and the others a CommError naming it.
void with_gathered_parameters(EngineParts& engine, const std::vector<std::string>& names,
                              int modifier_rank, const Engine::GatheredFn& fn);

}  // namespace zt
