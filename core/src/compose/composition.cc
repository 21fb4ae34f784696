// compose and recompose: communicator, strategy, optimizer, tiers and engine from a job's
// settings and the plugin catalog.
#include <tuple>
#include "compose/offload_tiers.h"
#include "zt/host/compose.h"

#include "zt/host/flight_recorder.h"
#include "zt/host/plugin_loader.h"

namespace zt {

namespace {

using MakeEngine = std::function<std::unique_ptr<Engine>(Composition&)>;

// The codecs plugins.codec_* choose, unless zero.codec_scope = "across_hosts" and the shard group
// (the ranks gathers and reduce-scatters run over: consecutive ranks) fits on one host.
void make_codecs(Composition& c, const EngineSettings& settings, PluginCatalog& catalog,
                 int group_size, int ranks_per_host) {
  const bool apply = codecs_apply(settings, group_size, ranks_per_host);
  c.codecs.clear();
  for (auto [choice, codec, role] :
       {std::tuple{&settings.codec_weights, &c.weight_codec, "parameter all-gather"},
        std::tuple{&settings.codec_gradients, &c.gradient_codec,
                   "gradient reduce-scatter (all-to-all)"}}) {
    codec->reset();
    if (!choice->chosen()) continue;
    std::string line = std::string(role) + ": ";
    if (!apply) {
      line += "exact (zero.codec_scope = \"across_hosts\" and the " + std::to_string(group_size) +
              " ranks of the shard group share a host)";
    } else {
      *codec = catalog.codec(choice->id, choice->key).create(choice->options);
      line += (*codec)->describe();
      if (choice == &settings.codec_gradients && settings.options.codec_error_feedback)
        line += ", error feedback";
    }
    c.codecs += (c.codecs.empty() ? "" : "; ") + line;
  }
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
  c.optimizer = catalog.optimizer(c.optimizer_id).create(settings.optimizer.options);
  c.tiers = make_offload_tiers(settings, catalog, env, store, timeout);
  c.options = settings.options;
  const ShardGroupChoice groups = shard_groups(settings, env.world, env.local_world);
  make_codecs(c, settings, catalog, groups.sharding_world(env.world), env.local_world);
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
  Composition c;
  // Observed: every collective goes through the flight recorder and the timeline trace.
  ObserveOptions observe;
  observe.check_collectives = settings.launch.check_collectives;
  c.comm = observe_communicator(
      catalog.comm(settings.comm.id)
          .create(settings.comm.options, comm_context(env, store, "train/", timeout)),
      "world", observe);
  compose_parts(c, settings, catalog, env, store, timeout, hooks.adjust, [&](Composition& made) {
    if (hooks.prepare) hooks.prepare(made);
    return make_engine(made);
  });
  return c;
}

}  // namespace

bool codecs_apply(const EngineSettings& settings, int group_size, int ranks_per_host) {
  const bool one_host = ranks_per_host > 0 && group_size <= ranks_per_host;
  return !(settings.codecs_across_hosts_only && one_host);
}

std::unique_ptr<ShardStrategy> make_shard_strategy(const EngineSettings& settings,
                                                   PluginCatalog& catalog) {
  const ShardStrategyPlugin& plugin = catalog.shard(settings.shard.id);
  if (settings.shard_stands_in) {
    return plugin.create(Options("plugin." + settings.shard.id, plugin.options(), {}, {}));
  }
  return plugin.create(settings.shard.options);
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
  // The engine waits for its in-flight work and drops its views of the parts; file tiers remove
  // their files, so the next arm's tiers start from nothing.
  for (const auto& group : c.engine->group_comm_stats()) add_stats(c.retired_groups, group.second);
  c.engine.reset();
  c.tiers = OffloadTiers{};
  c.optimizer.reset();
  c.strategy.reset();
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
