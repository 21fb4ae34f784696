// Composition: a job's engine made from its settings (zt/host/engine_settings.h) and the plugin
// catalog, in one place for every program that trains (the trainer's tasks and live A/B, the
// Python package, the engine oracle's checks): the communicator, the shard strategy, the
// optimizer, the offload tiers and the engine over them, plus a rank's way into its job (the
// rendezvous store and the bound on every wait) and the shard groups MiCS asks for.
// Thread safety: build and use a Composition from one thread (the training thread); the free
// functions that read no store are pure.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zt/api.h"
#include "zt/communicator.h"
#include "zt/host/engine.h"
#include "zt/host/engine_settings.h"
#include "zt/host/rendezvous.h"
#include "zt/model_source.h"
#include "zt/offload.h"
#include "zt/optimizer.h"
#include "zt/shard_strategy.h"
#include "zt/store.h"
#include "zt/unit.h"

namespace zt {

class PluginCatalog;

// A rank's way into its job, the same for every program: the bound on every wait
// (launch.timeout_s) and rank 0's store at MASTER_ADDR:MASTER_PORT, from the launcher's
// environment (torchrun, zt's launcher, mpirun, srun), else [launch]; a job of one process picks
// a free port and is its own job (ZT_JOB_ID, which offload files are named after).
struct JobStore {
  std::chrono::milliseconds timeout{0};
  std::unique_ptr<Store> store;
};
// Collective: every rank of the job calls it, once per process, from its main thread (it may set
// an environment variable). Throws ConfigError for a job of several ranks with no port to meet
// at, CommError from the rendezvous.
ZT_API JobStore join_job_store(const LaunchSettings& launch, const RankEnv& env);

// The shard group a job asks for, resolved against its world and ranks per host. The engine
// shards over groups of that many ranks (EngineOptions::shard_group_size) and the memory theory
// divides by it instead of the world.
struct ShardGroupChoice {
  int size = 0;               // ranks per shard group; 0 = every rank (flat ZeRO)
  bool hierarchical = false;  // mics_hierarchical_params_gather
  int ranks_per_host = 0;     // as given (0 = unknown)
  int sharding_world(int world) const { return size > 0 ? size : world; }
};
// world: the job's ranks; ranks_per_host: ranks on one host, 0 if unknown. Throws ConfigError
// (file:line of the key) for a size that does not divide the world, exceeds it, or is 0 ("the
// ranks of one host") with the ranks per host unknown or not dividing the world.
ZT_API ShardGroupChoice shard_groups(const EngineSettings& settings, int world, int ranks_per_host);

// The offload tiers [plugins] names (offload_optimizer, offload_param), created once per plugin
// id so one tier may serve both roles, and the job id that keeps their files apart from other
// jobs'. File tiers keep their files under <path>/zt-<job>/ (zt/offload.h); after a rank was
// killed (no destructors ran) the launcher removes that folder (remove_offload_leftovers).
struct OffloadTiers {
  std::map<std::string, std::unique_ptr<OffloadTier>> by_id;
  std::string optimizer_id, param_id;  // "" when that role is not offloaded
  std::string job;                     // offload_job_id()

  ZT_API EngineTiers engine_tiers() const;
  // "optimizer states -> offload_nvme: files under ...; parameters -> ..." or "" without offload.
  ZT_API std::string describe() const;
};
// Unique per job and equal on every rank: the zt launcher's ZT_JOB_ID (it also removes what
// killed ranks leave), else an id rank 0 draws and publishes through the store (torchrun's
// default run id and a fixed MASTER_PORT are shared by unrelated jobs on a node).
ZT_API std::string offload_job_id(Store& store, int rank, std::chrono::milliseconds timeout);
// A new job id: "<pid>-<8 random hex digits>". The pid alone was not unique: a launcher in a
// container is often pid 1, and two such jobs sharing an offload path shared a folder (and each
// removed the other's at its end).
ZT_API std::string draw_job_id();
// Whether the role's tier keeps its bytes in files (its plugin takes a `path`). False when the
// role is not offloaded.
ZT_API bool offloads_to_files(const PluginChoice& role);
// The share of parameters whose fp32 master is its own copy because the optimizer states or the
// stage-3 parameter shards are offloaded.
ZT_API double separate_master_share(const EngineSettings& settings);
// What the chosen optimizer keeps per parameter element, for estimates made before the job runs:
// asked of an optimizer made with the job's options as compose() makes it, so a plugin's own
// answers count, not Adam's nor its option names.
struct OptimizerFootprint {
  int64_t states = 2;        // state_names(): Adam's 2, momentum SGD's 1, plain SGD's 0
  int64_t state_bytes = 4;   // of each state: state_dtype()'s size (bf16: 2)
  int64_t master_bytes = 4;  // of the master weights: master_dtype()'s size (bf16: 2)
};
// Adam's fp32 footprint when no optimizer is chosen. Throws what the plugin's create() throws.
ZT_API OptimizerFootprint optimizer_footprint(const EngineSettings& settings,
                                              PluginCatalog& catalog);
// The same of an optimizer that exists (a composition's).
ZT_API OptimizerFootprint optimizer_footprint(const Optimizer& optimizer);
// A bf16 master (`bf16_master`: the optimizer keeps one) beside fp32 parameters in compute
// memory is a second copy of every parameter (2 bytes more than the fp32 master it replaces,
// which the parameters would have been), and beside fp16 parameters a second 16-bit copy
// rounded another way: both refused with a ConfigError naming the ways that make it pay.
// compose() checks it; estimates (trainer estimate, tune) check it before they count such a
// composition as fitting. With part of the optimizer offloaded (a fraction below 1), the share
// left in memory keeps such copies: docs/offload.md says so.
ZT_API void check_master_placement(const EngineSettings& settings, bool bf16_master);
// The engine takes its world from the communicator: one that says rank 0 of 1 on every rank
// trained each rank alone, its gradients never reduced, without a word. Throws PluginError
// naming plugin `id` unless `comm` is the launcher's rank of its world.
ZT_API void check_made_communicator(const Communicator& comm, const std::string& id,
                                    const RankEnv& env);
// Makes the optimizer and the chosen codecs of `settings` once and checks them as compose()
// does (the dtypes an optimizer may keep, the codec contract): a live A/B arm composed only at
// its first switch is refused at the start instead. Throws PluginError naming the plugin.
ZT_API void check_made_plugins(const EngineSettings& settings, PluginCatalog& catalog);
// Removes <path>/zt-<job> of every configured file tier; returns the folders that were there.
ZT_API std::vector<std::string> remove_offload_leftovers(const EngineSettings& settings,
                                                         const std::string& job);

// A launcher that does not know its ranks' configs (python3 -m zt.launch) learns their file
// tiers' folders from the ranks: with ZT_OFFLOAD_NOTES naming a folder in their environment,
// each rank writes there the <path>/zt-<job> of every file tier it makes, before any file. After
// the ranks ended, this removes each noted folder of job `job` that is still there (a killed
// rank ran no destructor), then the notes folder itself unless `keep_notes` (a folder this
// launcher was given, whose giver reads it after); returns the folders removed. `job` "" (a
// launcher that started another launcher, whose job id it never learns): every noted zt-<job>
// folder, the notes folder being that one job's alone.
ZT_API std::vector<std::string> remove_noted_offload_folders(const std::string& notes,
                                                             const std::string& job,
                                                             bool keep_notes = false);
// A private folder under TMPDIR for ZT_OFFLOAD_NOTES; "" (with a warning on stderr) where none
// can be made: the job runs, and a killed rank's files stay.
ZT_API std::string make_offload_notes_folder();
// A rank that leaves without its destructors under a launcher that removes nothing (torchrun's
// agent stopping a job with SIGTERM, a Python script's uncaught exception): removes, in the job
// folders of the file tiers this process made, each folder (rank<r>, rank<r>.2, ...) that holds
// a file this process has open, which a tier keeps open while it lives (zt/offload.h); then each
// job folder left empty. Returns the folders removed. Other processes' folders stay, a forked
// child's parent's too: they may still be training. Gives up (removing nothing) if another
// thread holds the list for 2 s. Thread safety: any thread, not a signal handler (it allocates).
ZT_API std::vector<std::string> remove_own_offload_files();

// Owns what the engine refers to. Members are destroyed in reverse order of declaration: the
// engine first (it waits for its in-flight gathers and reads), then the offload tiers (a file
// tier removes its files when destroyed), the optimizer, the strategy and, last, the
// communicator (its destructor is a collective shutdown with the other ranks).
struct Composition {
  std::unique_ptr<Communicator> comm;
  std::string shard_id;  // the strategy's plugin (shard_bucket where it stands in)
  std::unique_ptr<ShardStrategy> strategy;
  std::string optimizer_id;
  std::unique_ptr<Optimizer> optimizer;
  OffloadTiers tiers;
  std::unique_ptr<Codec> weight_codec, gradient_codec;  // plugins.codec_*; null = exact
  // Where the gradient codec codes: the shard group's reduce-scatter, MiCS's all-reduce across
  // the groups (zero.codec_scope may leave either exact).
  bool gradients_in_group = false, gradients_across = false;
  std::string codecs;  // what the codecs do here, for the run header; "" when none is chosen
  EngineOptions options;
  std::unique_ptr<Engine> engine;
  EngineCodecs engine_codecs() const {
    return {weight_codec.get(), gradients_in_group ? gradient_codec.get() : nullptr,
            gradients_across ? gradient_codec.get() : nullptr};
  }
  CommStats retired_groups;  // counters of the MiCS groups of engines a live A/B replaced
};

// Every collective this rank issued since the job began: the job's communicator's and the
// engine's groups' (MiCS), those of replaced engines included.
ZT_API CommStats job_comm_stats(const Composition& composition);

// Which collectives the codecs plugins.codec_* choose code, for a job of `world` ranks sharded
// over groups of `group_size` consecutive ranks, `ranks_per_host` to a host (0 = unknown): each
// collective of a role that has a codec, unless zero.codec_scope = "across_hosts" and its ranks
// share a host. The composition, the comm estimate and the memory fit all place them by this.
// Pure.
struct CodecPlacement {
  bool weights = false;             // the shard group's parameter all-gathers (2+ ranks)
  bool gradients_in_group = false;  // the shard group's gradient reduce-scatter (2+ ranks)
  bool gradients_across = false;    // MiCS: the all-reduce of gradient shards across the groups
};
ZT_API CodecPlacement codec_placement(const EngineSettings& settings, int world, int group_size,
                                      int ranks_per_host);
// Whether every group of a job of `world` ranks, `ranks_per_host` consecutive ranks to a host
// (0 = unknown: false), lies on one host: the shard groups (`group_size` consecutive ranks from
// rank 0) or, with `replicas`, the groups that take one rank of each shard group. A group may be
// no wider than a host and still straddle two (12 ranks, 6 to a host, groups of 4: ranks 4-7).
// Pure.
ZT_API bool groups_on_one_host(int world, int group_size, int ranks_per_host, bool replicas);
// The shard strategy settings.shard makes (the stand-in with its plugin's defaults). Throws what
// the plugin's create() throws (ConfigError).
ZT_API std::unique_ptr<ShardStrategy> make_shard_strategy(const EngineSettings& settings,
                                                          PluginCatalog& catalog);

// What a composition may be asked to do besides what the settings say.
struct ComposeHooks {
  // Runs once the communicator exists, before the engine takes over the parameters (the Python
  // package broadcasts rank 0's values there: each rank's module was initialised by its own RNG).
  std::function<void(Composition&)> prepare;
  // Edits the engine options before the engine is built: for settings a config does not express
  // (the engine check turns on dynamic loss scaling outside fp16).
  std::function<void(EngineOptions&)> adjust;
};

// Builds comm (plugins.comm, over `store`), shard strategy, optimizer, offload tiers and the
// engine over `units` (which must outlive the result) for the rank `env` names, from the
// settings and the plugins of `catalog` (which must hold them: the config that made the settings
// loaded them). Every rank calls it at the same point: the comm plugin and the offload job id
// meet through `store`. Throws what the plugins and the engine throw (ConfigError, PluginError,
// CommError, IoError).
ZT_API Composition compose(const EngineSettings& settings, PluginCatalog& catalog,
                           const RankEnv& env, Store& store, std::chrono::milliseconds timeout,
                           const std::vector<Unit*>& units, const ComposeHooks& hooks = {});
// The same with the engine building the model from `source`, one unit at a time (zero.Init);
// the engine owns the units.
ZT_API Composition compose(const EngineSettings& settings, PluginCatalog& catalog,
                           const RankEnv& env, Store& store, std::chrono::milliseconds timeout,
                           ModelSource& source, const ComposeHooks& hooks = {});

// Live A/B: rebuilds every part but the communicator from `settings` (another arm of the same
// job), with the engine building the model from `source` again. The old engine, tiers,
// optimizer and strategy are destroyed first (in that order); the communicator, its connections
// and counters are kept (the old engine's MiCS groups' counters go to retired_groups).
// Collective, like compose().
ZT_API void recompose(Composition& composition, const EngineSettings& settings,
                      PluginCatalog& catalog, const RankEnv& env, Store& store,
                      std::chrono::milliseconds timeout, ModelSource& source);

}  // namespace zt
