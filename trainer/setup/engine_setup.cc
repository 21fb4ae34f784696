#include "setup/engine_setup.h"

#include "settings/job_settings.h"
#include "setup/shard_groups.h"
#include "zt/flight_recorder.h"
#include "zt/plugin_loader.h"
#include "zt/shard_strategy.h"

namespace zt::trainer {

namespace {

at::ScalarType dtype_from_name(const std::string& name) {
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  return at::kFloat;
}

void read_loss_scaler(const Options& precision, LossScalerOptions& o) {
  o.initial_scale = precision.get_double("initial_scale");
  o.min_scale = precision.get_double("min_scale");
  o.max_scale = precision.get_double("max_scale");
  o.growth_factor = precision.get_double("growth_factor");
  o.backoff_factor = precision.get_double("backoff_factor");
  o.growth_interval = precision.get_int("growth_interval");
  o.hysteresis = precision.get_int("hysteresis");
}

void read_offload(const Options& zero, EngineOptions& o) {
  o.offload_optimizer_fraction = zero.get_double("offload_optimizer_fraction");
  o.offload_param_fraction = zero.get_double("offload_param_fraction");
  o.sub_group_size = zero.get_int("sub_group_size");
  o.pipeline_read = zero.get_bool("pipeline_read");
  o.pipeline_write = zero.get_bool("pipeline_write");
}

}  // namespace

std::string shard_plugin_id(const Config& config) {
  const std::string& id = config.section("plugins").get_string("shard");
  return id.empty() ? "shard_bucket" : id;
}

std::unique_ptr<ShardStrategy> make_shard_strategy(const Config& config) {
  const std::string id = shard_plugin_id(config);
  const ShardStrategyPlugin& plugin = config.catalog().shard(id);
  if (!config.section("plugins").get_string("shard").empty()) {
    return plugin.create(config.plugin_options(id));
  }
  return plugin.create(Options("plugin." + id, plugin.options(), {}, {}));
}

EngineOptions engine_options_from_config(const Config& config) {
  const Options& zero = config.section("zero");
  const Options& precision = config.section("precision");
  EngineOptions o;
  o.stage = static_cast<int>(zero.get_int("stage"));
  o.compute_dtype = dtype_from_name(precision.get_string("compute"));
  o.dynamic_loss_scale = o.compute_dtype == at::kHalf;
  o.grad_accum = JobSettings::of(config).data.grad_accum;
  o.reduce_bucket_mb = zero.get_double("reduce_bucket_mb");
  o.overlap_comm = zero.get_bool("overlap_comm");
  o.prefetch_units = zero.get_int("prefetch_units");
  o.prefetch_elements = zero.get_int("prefetch_elements");
  o.max_live_parameters = zero.get_int("max_live_parameters");
  o.allgather_bucket_mb = zero.get_double("allgather_bucket_mb");
  o.param_persistence_threshold = zero.get_int("param_persistence_threshold");
  o.gradient_predivide_factor = zero.get_double("gradient_predivide_factor");
  o.gradient_clipping = zero.get_double("gradient_clipping");
  read_loss_scaler(precision, o.scaler);
  o.activation_checkpointing = config.section("model").get_bool("activation_checkpointing");
  read_offload(zero, o);
  return o;
}

namespace {

// Everything but the communicator, which `s` has: the engine (`make_engine` builds it over the
// parts) and what it is composed of.
void build_parts(EngineSetup& s, const Config& config, const RankEnv& env, Store& store,
                 std::chrono::milliseconds timeout,
                 const std::function<void(EngineOptions&)>& adjust,
                 const std::function<std::unique_ptr<Engine>(EngineSetup&)>& make_engine) {
  const Options& plugins = config.section("plugins");
  PluginCatalog& catalog = config.catalog();
  s.shard_id = shard_plugin_id(config);
  s.strategy = make_shard_strategy(config);
  s.optimizer_id = plugins.get_string("optimizer");
  s.optimizer = catalog.optimizer(s.optimizer_id).create(config.plugin_options(s.optimizer_id));
  s.tiers = make_offload_tiers(config, env, store, timeout);
  s.options = engine_options_from_config(config);
  const ShardGroupChoice groups = shard_group_choice(config, env.world, env.local_world);
  s.options.shard_group_size = groups.size;
  s.options.hierarchical_params_gather = groups.hierarchical;
  s.options.ranks_per_host = groups.ranks_per_host;
  if (adjust) adjust(s.options);
  s.engine = make_engine(s);
}

// The communicator (plugins.comm), then the parts.
EngineSetup build_setup(const Config& config, const RankEnv& env, Store& store,
                        std::chrono::milliseconds timeout,
                        const std::function<void(EngineOptions&)>& adjust,
                        const std::function<std::unique_ptr<Engine>(EngineSetup&)>& make_engine) {
  const Options& plugins = config.section("plugins");
  EngineSetup s;
  const std::string& comm_id = plugins.get_string("comm");
  // Observed: every collective goes through the flight recorder and the timeline trace.
  ObserveOptions observe;
  observe.check_collectives = config.section("launch").get_bool("check_collectives");
  s.comm = observe_communicator(
      config.catalog().comm(comm_id).create(config.plugin_options(comm_id),
                                            comm_context(env, store, "train/", timeout)),
      "world", observe);
  build_parts(s, config, env, store, timeout, adjust, make_engine);
  return s;
}

}  // namespace

EngineSetup build_engine_setup(const Config& config, const RankEnv& env, Store& store,
                               std::chrono::milliseconds timeout, const std::vector<Unit*>& units,
                               const std::function<void(EngineOptions&)>& adjust) {
  return build_setup(config, env, store, timeout, adjust, [&](EngineSetup& s) {
    return std::make_unique<Engine>(units, *s.comm, *s.strategy, *s.optimizer, s.options,
                                    s.tiers.engine_tiers());
  });
}

EngineSetup build_engine_setup(const Config& config, const RankEnv& env, Store& store,
                               std::chrono::milliseconds timeout, const std::vector<Unit*>& units,
                               const std::function<void(EngineSetup&)>& prepare,
                               const std::function<void(EngineOptions&)>& adjust) {
  return build_setup(config, env, store, timeout, adjust, [&](EngineSetup& s) {
    prepare(s);
    return std::make_unique<Engine>(units, *s.comm, *s.strategy, *s.optimizer, s.options,
                                    s.tiers.engine_tiers());
  });
}

EngineSetup build_engine_setup(const Config& config, const RankEnv& env, Store& store,
                               std::chrono::milliseconds timeout, ModelSource& source,
                               const std::function<void(EngineOptions&)>& adjust) {
  return build_setup(config, env, store, timeout, adjust, [&](EngineSetup& s) {
    return std::make_unique<Engine>(source, *s.comm, *s.strategy, *s.optimizer, s.options,
                                    s.tiers.engine_tiers());
  });
}

void rebuild_engine_setup(EngineSetup& setup, const Config& config, const RankEnv& env,
                          Store& store, std::chrono::milliseconds timeout, ModelSource& source) {
  // The engine waits for its in-flight work and drops its views of the parts; file tiers remove
  // their files, so the next arm's tiers start from nothing.
  for (const auto& group : setup.engine->group_comm_stats()) {
    add_stats(setup.retired_groups, group.second);
  }
  setup.engine.reset();
  setup.tiers = OffloadTiers{};
  setup.optimizer.reset();
  setup.strategy.reset();
  build_parts(setup, config, env, store, timeout, {}, [&](EngineSetup& s) {
    return std::make_unique<Engine>(source, *s.comm, *s.strategy, *s.optimizer, s.options,
                                    s.tiers.engine_tiers());
  });
}

CommStats job_comm_stats(const EngineSetup& setup) {
  CommStats total = setup.comm->stats();
  add_stats(total, setup.retired_groups);
  if (setup.engine) {
    for (const auto& group : setup.engine->group_comm_stats()) add_stats(total, group.second);
  }
  return total;
}

}  // namespace zt::trainer
