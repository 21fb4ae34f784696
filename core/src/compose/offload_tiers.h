// The tiers a composition creates (compose/composition.cc); the rest of offload tiers' face is
// public (zt/host/compose.h).
#pragma once

#include <chrono>

#include "zt/host/compose.h"

namespace zt {

// Creates the tiers of settings.offload_optimizer and offload_param (one per plugin id) for the
// rank `env` names; meets the other ranks through `store` for the job id. Throws what the
// plugins throw (ConfigError, IoError).
OffloadTiers make_offload_tiers(const EngineSettings& settings, PluginCatalog& catalog,
                                const RankEnv& env, Store& store,
                                std::chrono::milliseconds timeout);

}  // namespace zt
