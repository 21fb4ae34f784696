// The engine and the plugins it is composed of, built from a config in one place: the trainer's
// training task and the multi-process engine check (tests/multiproc) wire them the same way.
// Thread safety: build and use from one thread (the training thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "setup/offload_tiers.h"
#include "zt/communicator.h"
#include "zt/config.h"
#include "zt/engine.h"
#include "zt/model_source.h"
#include "zt/optimizer.h"
#include "zt/rendezvous.h"
#include "zt/shard_strategy.h"
#include "zt/store.h"
#include "zt/unit.h"

namespace zt::trainer {

// Reads [zero] and [precision] (and data.grad_accum, model.activation_checkpointing). Dynamic
// loss scaling is on for fp16 compute only.
EngineOptions engine_options_from_config(const Config& config);

// The shard strategy's plugin id: plugins.shard, or shard_bucket standing in at stage 0 when it is
// empty (stage 0 needs a layout, never a shard).
std::string shard_plugin_id(const Config& config);
// The strategy that plugin makes from its [plugin.<id>] table (defaults when it stands in).
// Throws what the plugin's create() throws (ConfigError).
std::unique_ptr<ShardStrategy> make_shard_strategy(const Config& config);

// Owns what the engine refers to. Members are destroyed in reverse order of declaration: the
// engine first (it waits for its in-flight gathers and reads), then the offload tiers (a file
// tier removes its files when destroyed), the optimizer, the strategy and, last, the
// communicator (its destructor is a collective shutdown with the other ranks).
struct EngineSetup {
  std::unique_ptr<Communicator> comm;
  std::string shard_id;  // the strategy's plugin: shard_bucket stands in at stage 0 when
                         // plugins.shard is empty (stage 0 needs a layout, never a shard)
  std::unique_ptr<ShardStrategy> strategy;
  std::string optimizer_id;
  std::unique_ptr<Optimizer> optimizer;
  OffloadTiers tiers;
  EngineOptions options;
  std::unique_ptr<Engine> engine;
  CommStats retired_groups;  // counters of the MiCS groups of engines a live A/B replaced
};

// Every collective this rank issued since the job began: the job's communicator's and the
// engine's groups' (MiCS), those of replaced engines included.
CommStats job_comm_stats(const EngineSetup& setup);

// Builds comm (plugins.comm, over `store`), shard strategy, optimizer, offload tiers and the
// engine over `units` (which must outlive the result) from `config`, for the rank `env` names.
// `adjust`, when given, edits the engine options read from the config before the engine is
// built: for settings a config does not express (the engine check turns on dynamic loss
// scaling outside fp16). Every rank calls it at the same point: the comm plugin and the offload
// job id meet through `store`. Throws what the plugins and the engine throw (ConfigError,
// PluginError, CommError, IoError).
EngineSetup build_engine_setup(const Config& config, const RankEnv& env, Store& store,
                               std::chrono::milliseconds timeout, const std::vector<Unit*>& units,
                               const std::function<void(EngineOptions&)>& adjust = {});
// The same for units whose ranks may hold different initial values (a Python module, each rank
// initialised by its own RNG): `prepare(setup)` runs once the communicator exists, before the
// engine takes over the parameters (the Python package broadcasts rank 0's values there).
EngineSetup build_engine_setup(const Config& config, const RankEnv& env, Store& store,
                               std::chrono::milliseconds timeout, const std::vector<Unit*>& units,
                               const std::function<void(EngineSetup&)>& prepare,
                               const std::function<void(EngineOptions&)>& adjust);
// The same with the engine building the model from `source`, one unit at a time (zero.Init);
// the engine owns the units.
EngineSetup build_engine_setup(const Config& config, const RankEnv& env, Store& store,
                               std::chrono::milliseconds timeout, ModelSource& source,
                               const std::function<void(EngineOptions&)>& adjust = {});

// Live A/B (live_ab.h): rebuilds every part but the communicator from `config`, another arm of
// the same job, with the engine building the model from `source` again. The old engine, tiers,
// optimizer and strategy are destroyed first (in that order); the communicator, its connections
// and counters are kept (the old engine's MiCS groups' counters go to retired_groups). Collective,
// like build_engine_setup.
void rebuild_engine_setup(EngineSetup& setup, const Config& config, const RankEnv& env,
                          Store& store, std::chrono::milliseconds timeout, ModelSource& source);

}  // namespace zt::trainer
