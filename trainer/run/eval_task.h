// `trainer eval --checkpoint DIR`: the validation loss of a checkpoint on the config's validation
// data ([eval], data.val_path / data.val_fraction, or synthetic data's own stream), at any world
// size, ZeRO stage, shard strategy and offload (the checkpoint loads as --resume loads it): the
// same number training logged at that step, since every rank evaluates the same fixed samples.
// Rank 0 prints it and writes it as JSON.
// Thread safety: the training thread only.
#pragma once

#include <chrono>
#include <string>

#include "settings/job_settings.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/rendezvous.h"
#include "zt/store.h"

namespace zt::trainer {

// Throws ConfigError when the config names no validation data. Touches no rank: run_job calls it
// before the ranks start, so bad input fails there, once.
void check_eval_inputs(const JobSettings& job);

// `checkpoint`: a checkpoint folder, its dir, or dir/best; `out_path`: the JSON file
// ('' = <run.out_dir>/eval.json). Collective.
int run_eval(const JobSettings& job, PluginCatalog& catalog, Store& store, const RankEnv& env,
             std::chrono::milliseconds timeout, const std::string& checkpoint,
             const std::string& out_path);

}  // namespace zt::trainer
