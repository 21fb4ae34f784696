// run.task = "train": the ZeRO training loop. Builds the model and data from the config, the
// communicator, shard strategy and optimizer from their plugins, and the engine; runs
// run.steps optimizer steps of data.grad_accum micro steps each; rank 0 shows progress, writes
// run.out_dir/metrics.jsonl and prints a summary with model-state bytes per rank next to
// ZeRO's theory.
#pragma once

#include <chrono>

#include "settings/job_settings.h"
#include "setup/memory_fit.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/rendezvous.h"
#include "zt/store.h"

namespace zt::trainer {

// The caller catches the stop signals (run/stop_signals.h) before the rank joins the job, so one
// that comes while the ranks start is not lost; this loop honours them after each step.
int run_train(const JobSettings& job, PluginCatalog& catalog, Store& store, const RankEnv& env,
              std::chrono::milliseconds timeout);

// Checks that need the world size and the model's size, before any rank allocates them:
// data.global_batch divisibility and model states against the memory limit (every live-A/B
// arm's), as `how` says. Throws ConfigError naming the keys and the way out.
void check_job_fits(const JobSettings& job, PluginCatalog& catalog, int world, const FitCheck& how);

}  // namespace zt::trainer
