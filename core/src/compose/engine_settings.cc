// EngineSettings::of: the core's sections of a validated config, typed once (the schema beside it,
// core/src/config/config_schema.cc, declares them), and the places of their keys.
#include "zt/host/engine_settings.h"

#include <cmath>

#include "zt/error.h"
#include "zt/host/config.h"

namespace zt {

void KeyPlaces::add(const Options& section) {
  for (const OptionSpec& spec : section.specs()) {
    places_[section.table() + "." + spec.name] = {section.where(spec.name).str(),
                                                  section.is_set(spec.name)};
  }
}

bool KeyPlaces::is_set(const std::string& key) const {
  const auto it = places_.find(key);
  return it != places_.end() && it->second.set;
}

std::string KeyPlaces::where(const std::string& key) const {
  const auto it = places_.find(key);
  if (it == places_.end()) throw InternalError("no place is known for the config key " + key);
  return it->second.where;
}

std::string KeyPlaces::key_at(const std::string& key) const {
  return key + " (" + where(key) + ")";
}

bool PluginChoice::declares(const std::string& option, std::optional<ValueType> type) const {
  for (const OptionSpec& spec : options.specs()) {
    if (spec.name == option) return !type || spec.type == *type;
  }
  return false;
}

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

void read_zero(const Options& zero, EngineOptions& o) {
  o.stage = static_cast<int>(zero.get_int("stage"));
  o.reduce_bucket_mb = zero.get_double("reduce_bucket_mb");
  o.overlap_comm = zero.get_bool("overlap_comm");
  o.prefetch_units = zero.get_int("prefetch_units");
  o.prefetch_elements = zero.get_int("prefetch_elements");
  o.max_live_parameters = zero.get_int("max_live_parameters");
  o.allgather_bucket_mb = zero.get_double("allgather_bucket_mb");
  o.param_persistence_threshold = zero.get_int("param_persistence_threshold");
  o.gradient_predivide_factor = zero.get_double("gradient_predivide_factor");
  o.gradient_clipping = zero.get_double("gradient_clipping");
  o.no_weight_decay = zero.get_string_list("no_weight_decay");
  o.offload_optimizer_fraction = zero.get_double("offload_optimizer_fraction");
  o.offload_param_fraction = zero.get_double("offload_param_fraction");
  o.sub_group_size = zero.get_int("sub_group_size");
  o.pipeline_read = zero.get_bool("pipeline_read");
  o.pipeline_write = zero.get_bool("pipeline_write");
  o.gradients_in_tier = zero.get_bool("gradients_in_tier");
  o.codec_error_feedback = zero.get_bool("codec_error_feedback");
}

// Either name of the MiCS group size: shard_group_size only where it alone was given (a rule
// refuses the two set to different values).
ShardGroupRequest read_groups(const Options& zero) {
  const char* key = zero.is_set("shard_group_size") && !zero.is_set("mics_shard_size")
                        ? "shard_group_size"
                        : "mics_shard_size";
  return {zero.get_int(key), std::string("zero.") + key,
          zero.get_bool("mics_hierarchical_params_gather")};
}

LaunchSettings read_launch(const Options& launch) {
  LaunchSettings l;
  l.nproc = static_cast<int>(launch.get_int("nproc"));
  l.device = launch.get_string("device");
  l.max_restarts = launch.get_int("max_restarts");
  l.master_addr = launch.get_string("master_addr");
  l.master_port = static_cast<int>(launch.get_int("master_port"));
  l.timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::llround(launch.get_double("timeout_s") * 1000)));
  l.check_collectives = launch.get_bool("check_collectives");
  l.flight_records = launch.get_int("flight_records");
  l.memory_limit_gb = launch.get_double("memory_limit_gb");
  return l;
}

PluginChoice choice(const Config& config, const std::string& role) {
  PluginChoice c;
  c.key = "plugins." + role;
  c.id = config.section("plugins").get_string(role);
  if (!c.chosen()) return c;
  // A codec's options are the table of the role it serves ([codec.weights]).
  c.options = role.rfind("codec_", 0) == 0 ? config.codec_options(role.substr(6))
                                           : config.plugin_options(c.id);
  return c;
}

}  // namespace

EngineSettings EngineSettings::of(const Config& config) {
  const Options& zero = config.section("zero");
  const Options& precision = config.section("precision");
  const Options& launch = config.section("launch");
  EngineSettings s;
  read_zero(zero, s.options);
  s.compute = precision.get_string("compute");
  s.options.compute_dtype = dtype_from_name(s.compute);
  s.options.dynamic_loss_scale = s.options.compute_dtype == at::kHalf;
  read_loss_scaler(precision, s.options.scaler);
  s.comm = choice(config, "comm");
  s.shard = choice(config, "shard");
  if (!s.shard.chosen()) {
    s.shard.id = "shard_bucket";
    s.shard_stands_in = true;
  }
  s.optimizer = choice(config, "optimizer");
  s.offload_optimizer = choice(config, "offload_optimizer");
  s.offload_param = choice(config, "offload_param");
  s.model = choice(config, "model");
  s.codec_weights = choice(config, "codec_weights");
  s.codec_gradients = choice(config, "codec_gradients");
  s.codecs_across_hosts_only = zero.get_string("codec_scope") == "across_hosts";
  s.groups = read_groups(zero);
  s.launch = read_launch(launch);
  for (const Options* section : {&zero, &precision, &config.section("plugins"), &launch}) {
    s.places.add(*section);
  }
  s.options.no_weight_decay_place = s.places.key_at("zero.no_weight_decay");
  return s;
}

}  // namespace zt
