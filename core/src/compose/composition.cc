// compose and recompose: communicator, strategy, optimizer, tiers and engine from a job's
// settings and the plugin catalog.
#include "zt/host/compose.h"

#include <ATen/Context.h>

#include <tuple>

#include "compose/codec_contract.h"
#include "compose/offload_tiers.h"
#include "zero/scratch_buffers.h"
#include "zt/error.h"
#include "zt/host/flight_recorder.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/rank_agreement.h"

namespace zt {

namespace {

using MakeEngine = std::function<std::unique_ptr<Engine>(Composition&)>;

// The codec `choice` selects, made and its contract tried.
std::unique_ptr<Codec> make_checked_codec(const PluginChoice& choice, PluginCatalog& catalog) {
  auto codec = created_by(catalog.codec(choice.id, choice.key).create(choice.options), choice.id,
                          "codec");
  check_codec_contract(*codec, choice.id, choice.key);
  return codec;
}

// Whether a codec codes the collectives of a kind of group: yes, unless zero.codec_scope =
// "across_hosts" and every such group lies on one host.
bool codes_groups(const EngineSettings& settings, bool on_one_host) {
  return !(settings.codecs_across_hosts_only && on_one_host);
}

// The codecs plugins.codec_* choose, each where it applies: the weight codec to the shard
// group's gathers, the gradient codec to its reduce-scatter and, with MiCS, to the all-reduce
// across the groups; with zero.codec_scope = "across_hosts" only those of them that cross hosts.
void make_codecs(Composition& c, const EngineSettings& settings, PluginCatalog& catalog, int world,
                 int group_size, int ranks_per_host) {
  const int replicas = world / group_size;
  // Which ranks share a host decides what "across_hosts" codes; unknown, every collective
  // would be coded, the ones inside a host too, against what the scope promises.
  if (settings.codecs_across_hosts_only && world > 1 && ranks_per_host <= 0 &&
      (settings.codec_weights.chosen() || settings.codec_gradients.chosen())) {
    throw ConfigError(settings.places.where("zero.codec_scope") +
                      ": zero.codec_scope = \"across_hosts\" needs to know which ranks share a "
                      "host, but the launcher did not say (LOCAL_WORLD_SIZE, "
                      "OMPI_COMM_WORLD_LOCAL_SIZE or SLURM_NTASKS_PER_NODE); start the ranks with "
                      "trainer --nproc, torchrun, mpirun or srun, or set zero.codec_scope = "
                      "\"all\"");
  }
  const CodecPlacement place = codec_placement(settings, world, group_size, ranks_per_host);
  const auto make = [&](const PluginChoice& choice) { return make_checked_codec(choice, catalog); };
  // A group of one rank reduces nothing; its codec still serves MiCS's all-reduce across.
  const bool in_group = codes_groups(settings,
                                     groups_on_one_host(world, group_size, ranks_per_host, false));
  c.weight_codec = place.weights ? make(settings.codec_weights) : nullptr;
  c.gradient_codec = settings.codec_gradients.chosen() && (in_group || place.gradients_across)
                         ? make(settings.codec_gradients)
                         : nullptr;
  c.gradients_in_group = place.gradients_in_group;
  c.gradients_across = place.gradients_across;
  const std::string exact =
      "exact (zero.codec_scope = \"across_hosts\" and its ranks share a host)";
  std::vector<std::string> lines;
  if (settings.codec_weights.chosen()) {
    lines.push_back("parameter all-gather: " +
                    (c.weight_codec   ? c.weight_codec->describe()
                     : group_size > 1 ? exact
                                      : "none (each shard group is one rank), weights exact"));
  }
  if (settings.codec_gradients.chosen()) {
    const std::string with = c.gradient_codec
                                 ? c.gradient_codec->describe() +
                                       (settings.options.codec_error_feedback ? ", error feedback"
                                                                              : "")
                                 : "";
    lines.push_back("gradient reduce-scatter (all-to-all): " +
                    (group_size == 1 ? "none (each shard group is one rank)"
                     : in_group      ? with
                                     : exact));
    if (replicas > 1) {
      lines.push_back("gradient all-reduce across the " + std::to_string(replicas) +
                      " MiCS groups: " + (place.gradients_across ? with : exact));
    }
  }
  c.codecs.clear();
  for (const std::string& line : lines) c.codecs += (c.codecs.empty() ? "" : "; ") + line;
}

// Each rank reads its ranks per host from its own launcher's variables, and from them decides
// which groups share a host: the codecs limited to links across hosts, MiCS groups of a host's
// ranks, the two-level gather. Ranks that read different values (mpirun -H a:2,b:4 gives local
// sizes 2 and 4), or hosts that do not hold consecutive ranks (mpirun --map-by node), made ranks
// of one group issue different collectives. Checked, where it decides anything, before any does.
void check_host_layout(Communicator& comm, const EngineSettings& settings, const RankEnv& env) {
  const bool codecs = settings.codec_weights.chosen() || settings.codec_gradients.chosen();
  const bool decides = settings.groups.size == 0 || settings.groups.hierarchical ||
                       (settings.codecs_across_hosts_only && codecs);
  if (env.world <= 1 || !decides) return;
  const float most = max_over_ranks(comm, static_cast<float>(env.local_world));
  const float fewest = -max_over_ranks(comm, -static_cast<float>(env.local_world));
  const std::string uses =
      "zero.mics_shard_size = 0, zero.mics_hierarchical_params_gather or zero.codec_scope = "
      "\"across_hosts\" place groups by host";
  if (most != fewest) {
    throw ConfigError(uses + ", but the launcher gave hosts different numbers of ranks (" +
                      std::to_string(static_cast<int>(fewest)) + " to " +
                      std::to_string(static_cast<int>(most)) +
                      "; this rank's host: " + std::to_string(env.local_world) +
                      "); start the same number of ranks on every host, or set "
                      "zero.mics_shard_size to a number and zero.codec_scope = \"all\"");
  }
  const int scattered = highest_failed_rank(
      comm, env.local_world > 0 && env.local_rank != env.rank % env.local_world);
  if (scattered >= 0) {
    throw ConfigError(uses + " and take each host to hold consecutive ranks, but rank " +
                      std::to_string(scattered) +
                      " is not at its place on its host (local rank vs rank % ranks per host: "
                      "mpirun --map-by node, srun --distribution=cyclic); place ranks by host "
                      "(mpirun --map-by slot, srun --distribution=block), or set "
                      "zero.mics_shard_size to a number and zero.codec_scope = \"all\"");
  }
}

// launch.device = "cuda" where LibTorch has no CUDA device: refused before any part is made. The
// engine computes on the CPU whatever the key says (it reaches only the tiers' pinned host
// memory so far), so a job without offload would otherwise train on the CPU as if it were on a
// GPU, and one with offload_cpu failed at its first allocation in LibTorch's words.
void check_launch_device(const EngineSettings& settings) {
  if (settings.launch.device != "cuda" || at::hasCUDA()) return;
  throw ConfigError(
      settings.places.key_at("launch.device") +
      " = \"cuda\", but this LibTorch has no CUDA device (a CPU-only build, or no "
      "GPU or driver here); the engine computes on the CPU in this release, and the "
      "key only pins offload_cpu's host memory for a GPU: set launch.device = \"cpu\"");
}

// The dtypes zt/optimizer.h allows: the engine sizes tiers and records checkpoints by them (an
// fp16 state was allocated, then recorded as fp32 in the checkpoint).
void check_optimizer_dtypes(const Optimizer& optimizer, const std::string& id) {
  for (const auto& [what, dtype] :
       {std::pair<const char*, at::ScalarType>{"state_dtype()", optimizer.state_dtype()},
        {"master_dtype()", optimizer.master_dtype()}}) {
    if (dtype == at::kFloat || dtype == at::kBFloat16) continue;
    throw PluginError("plugin '" + id + "' (optimizer): its " + what + " is " +
                      std::string(c10::toString(dtype)) +
                      "; zt keeps optimizer states and masters in Float or BFloat16 only "
                      "(zt/optimizer.h; report it to the plugin's authors)");
  }
}

// The optimizer `choice` selects, made and its dtypes checked.
std::unique_ptr<Optimizer> make_checked_optimizer(const PluginChoice& choice,
                                                  PluginCatalog& catalog) {
  auto optimizer = created_by(catalog.optimizer(choice.id).create(choice.options), choice.id,
                              "optimizer");
  check_optimizer_dtypes(*optimizer, choice.id);
  return optimizer;
}

// Everything but the communicator, which `c` has: the engine (`make_engine` builds it over the
// parts) and what it is composed of.
void compose_parts(Composition& c, const EngineSettings& settings, PluginCatalog& catalog,
                   const RankEnv& env, Store& store, std::chrono::milliseconds timeout,
                   const std::function<void(EngineOptions&)>& adjust,
                   const MakeEngine& make_engine) {
  c.shard_id = settings.shard.id;
  c.strategy = make_shard_strategy(settings, catalog);
  c.optimizer_id = settings.optimizer.id;
  c.optimizer = make_checked_optimizer(settings.optimizer, catalog);
  check_master_placement(settings, c.optimizer->master_dtype() != at::kFloat);
  c.tiers = make_offload_tiers(settings, catalog, env, store, timeout);
  c.options = settings.options;
  check_host_layout(*c.comm, settings, env);
  const ShardGroupChoice groups = shard_groups(settings, env.world, env.local_world);
  // The two-level gather splits a group by host; unknown hosts, it was left out without a word.
  if (groups.hierarchical && settings.options.stage >= 1 && env.world > 1 && env.local_world <= 0) {
    throw ConfigError(settings.places.where("zero.mics_hierarchical_params_gather") +
                      ": zero.mics_hierarchical_params_gather = true gathers in two levels by "
                      "host, but the launcher did not say which ranks share a host "
                      "(LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE or SLURM_NTASKS_PER_NODE); "
                      "start the ranks with trainer --nproc, torchrun, mpirun or srun, or set "
                      "zero.mics_hierarchical_params_gather = false");
  }
  make_codecs(c, settings, catalog, env.world, groups.sharding_world(env.world), env.local_world);
  c.options.shard_group_size = groups.size;
  c.options.hierarchical_params_gather = groups.hierarchical;
  c.options.ranks_per_host = groups.ranks_per_host;
  if (adjust) adjust(c.options);
  c.engine = make_engine(c);
}

// The communicator (plugins.comm), then the parts.
Composition compose_all(const EngineSettings& settings, PluginCatalog& catalog, const RankEnv& env,
                        Store& store, std::chrono::milliseconds timeout, const ComposeHooks& hooks,
                        const MakeEngine& make_engine) {
  check_launch_device(settings);  // before the communicator, whose plugin may want the device
  Composition c;
  // Observed: every collective goes through the flight recorder and the timeline trace.
  ObserveOptions observe;
  observe.check_collectives = settings.launch.check_collectives;
  std::unique_ptr<Communicator> world = created_by(
      catalog.comm(settings.comm.id)
          .create(settings.comm.options, comm_context(env, store, "train/", timeout)),
      settings.comm.id, "comm");
  check_made_communicator(*world, settings.comm.id, env);
  c.comm = observe_communicator(std::move(world), "world", observe);
  compose_parts(c, settings, catalog, env, store, timeout, hooks.adjust, [&](Composition& made) {
    if (hooks.prepare) hooks.prepare(made);
    return make_engine(made);
  });
  return c;
}

}  // namespace

bool groups_on_one_host(int world, int group_size, int ranks_per_host, bool replicas) {
  if (world <= 1) return true;  // one process: one host, whatever the launcher said
  if (ranks_per_host <= 0 || group_size <= 0) return false;
  const int count = replicas ? group_size : world / group_size;
  for (int g = 0; g < count; ++g) {
    // Hosts hold consecutive ranks, and a group's ranks increase: its first and last decide.
    const int first = replicas ? g : g * group_size;
    const int last = replicas ? g + (world / group_size - 1) * group_size : first + group_size - 1;
    if (first / ranks_per_host != last / ranks_per_host) return false;
  }
  return true;
}

CodecPlacement codec_placement(const EngineSettings& settings, int world, int group_size,
                               int ranks_per_host) {
  const int replicas = world / group_size;
  const bool in_group = codes_groups(settings,
                                     groups_on_one_host(world, group_size, ranks_per_host, false));
  const bool across = replicas > 1 &&
                      codes_groups(settings,
                                   groups_on_one_host(world, group_size, ranks_per_host, true));
  CodecPlacement p;
  // A group of one rank gathers nothing: coded, its weights were only rounded.
  p.weights = settings.codec_weights.chosen() && in_group && group_size > 1;
  p.gradients_in_group = settings.codec_gradients.chosen() && in_group && group_size > 1;
  p.gradients_across = settings.codec_gradients.chosen() && across;
  return p;
}

// Where a bf16 master costs memory instead of saving it. The key is optim_hybrid_adam's
// (plugin.<id>.master_dtype) where the optimizer declares one; another optimizer's bf16 masters
// are its own choice, named as such.
void check_master_placement(const EngineSettings& settings, bool bf16_master) {
  if (!bf16_master) return;
  const Options& o = settings.optimizer.options;
  const bool declared = settings.optimizer.declares("master_dtype");
  const std::string where = declared ? o.where("master_dtype").str()
                                     : "plugins.optimizer = " + settings.optimizer.id;
  const std::string bf16 = declared ? "plugin." + settings.optimizer.id + ".master_dtype = \"bf16\""
                                    : "optimizer " + settings.optimizer.id +
                                          "'s bf16 masters (its master_dtype())";
  const std::string keep = declared ? "keep master_dtype = \"fp32\""
                                    : "choose an optimizer with fp32 masters";
  if (settings.options.compute_dtype == at::kHalf) {
    throw ConfigError(where + ": " + bf16 +
                      " with precision.compute = \"fp16\" keeps a bf16 copy of every parameter "
                      "beside the fp16 ones; compute in bf16 (the master is then the parameters) "
                      "or " +
                      keep);
  }
  const bool offloaded = settings.offload_optimizer.chosen() &&
                         settings.options.offload_optimizer_fraction > 0;
  if (settings.options.compute_dtype != at::kFloat || offloaded) return;
  throw ConfigError(where + ": " + bf16 +
                    " with precision.compute = \"fp32\" and nothing in plugins.offload_optimizer "
                    "keeps the fp32 parameters beside a bf16 copy (6 bytes a parameter, where the "
                    "fp32 parameters alone are the master in 4); compute in bf16 "
                    "(precision.compute = \"bf16\": the master is then the parameters), offload "
                    "the optimizer (plugins.offload_optimizer with "
                    "zero.offload_optimizer_fraction > 0), or " +
                    keep);
}

void check_made_communicator(const Communicator& comm, const std::string& id, const RankEnv& env) {
  if (comm.rank() == env.rank && comm.size() == env.world) return;
  throw PluginError("plugin '" + id + "' (comm) made a communicator of rank " +
                    std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) +
                    " for rank " + std::to_string(env.rank) + " of " + std::to_string(env.world) +
                    " (the launcher's RANK and WORLD_SIZE); a communicator plugin's create() "
                    "makes the context's rank (report it to the plugin's authors)");
}

void check_made_plugins(const EngineSettings& settings, PluginCatalog& catalog) {
  if (settings.optimizer.chosen()) make_checked_optimizer(settings.optimizer, catalog);
  for (const PluginChoice* c : {&settings.codec_weights, &settings.codec_gradients}) {
    if (c->chosen()) make_checked_codec(*c, catalog);
  }
}

OptimizerFootprint optimizer_footprint(const Optimizer& optimizer) {
  return {static_cast<int64_t>(optimizer.state_names().size()),
          static_cast<int64_t>(c10::elementSize(optimizer.state_dtype())),
          static_cast<int64_t>(c10::elementSize(optimizer.master_dtype()))};
}

OptimizerFootprint optimizer_footprint(const EngineSettings& settings, PluginCatalog& catalog) {
  const PluginChoice& o = settings.optimizer;
  if (!o.chosen()) return {};
  return optimizer_footprint(
      *created_by(catalog.optimizer(o.id).create(o.options), o.id, "optimizer"));
}

std::unique_ptr<ShardStrategy> make_shard_strategy(const EngineSettings& settings,
                                                   PluginCatalog& catalog) {
  const ShardStrategyPlugin& plugin = catalog.shard(settings.shard.id);
  if (settings.shard_stands_in) {
    return created_by(
        plugin.create(Options("plugin." + settings.shard.id, plugin.options(), {}, {})),
        settings.shard.id, "shard");
  }
  return created_by(plugin.create(settings.shard.options), settings.shard.id, "shard");
}

Composition compose(const EngineSettings& settings, PluginCatalog& catalog, const RankEnv& env,
                    Store& store, std::chrono::milliseconds timeout,
                    const std::vector<Unit*>& units, const ComposeHooks& hooks) {
  return compose_all(settings, catalog, env, store, timeout, hooks, [&](Composition& c) {
    return std::make_unique<Engine>(units, *c.comm, *c.strategy, *c.optimizer, c.options,
                                    c.tiers.engine_tiers(), c.engine_codecs());
  });
}

Composition compose(const EngineSettings& settings, PluginCatalog& catalog, const RankEnv& env,
                    Store& store, std::chrono::milliseconds timeout, ModelSource& source,
                    const ComposeHooks& hooks) {
  return compose_all(settings, catalog, env, store, timeout, hooks, [&](Composition& c) {
    return std::make_unique<Engine>(source, *c.comm, *c.strategy, *c.optimizer, c.options,
                                    c.tiers.engine_tiers(), c.engine_codecs());
  });
}

void recompose(Composition& c, const EngineSettings& settings, PluginCatalog& catalog,
               const RankEnv& env, Store& store, std::chrono::milliseconds timeout,
               ModelSource& source) {
  check_launch_device(settings);  // before the running arm's parts are taken down
  // The engine waits for its in-flight work and drops its views of the parts; file tiers remove
  // their files, so the next arm's tiers start from nothing.
  for (const auto& group : c.engine->group_comm_stats()) add_stats(c.retired_groups, group.second);
  c.engine.reset();
  c.tiers = OffloadTiers{};
  c.optimizer.reset();
  c.strategy.reset();
  // The coded collectives' staging, kept for the last arm's sizes: counted in the next arm's
  // memory otherwise (an exact arm reported a codec's buffers as its own peak).
  ScratchBuffers::process().drop_free();
  compose_parts(c, settings, catalog, env, store, timeout, {}, [&](Composition& made) {
    return std::make_unique<Engine>(source, *made.comm, *made.strategy, *made.optimizer,
                                    made.options, made.tiers.engine_tiers(), made.engine_codecs());
  });
}

CommStats job_comm_stats(const Composition& c) {
  CommStats total = c.comm->stats();
  add_stats(total, c.retired_groups);
  if (c.engine) {
    for (const auto& group : c.engine->group_comm_stats()) add_stats(total, group.second);
  }
  return total;
}

}  // namespace zt
