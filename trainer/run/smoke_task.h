// run.task = "smoke": a health check of the installation and the fabric. Every rank loads every
// plugin found, builds the configured communicator, verifies each collective's result on sizes
// 0, 1, odd and large (fp32 and bf16), then times them; rank 0 prints a table.
#pragma once

#include <chrono>

#include "settings/job_settings.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/rendezvous.h"
#include "zt/store.h"

namespace zt::trainer {

int run_smoke(const JobSettings& job, PluginCatalog& catalog, Store& store, const RankEnv& env,
              std::chrono::milliseconds timeout);

}  // namespace zt::trainer
