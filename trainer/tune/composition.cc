#include "tune/composition.h"

#include <cstdio>

#include "settings/job_settings.h"
#include "zt/host/compose.h"
#include "zt/options.h"

namespace zt::trainer {

namespace {

std::string percent(double share) { return short_number(share * 100) + "%"; }

}  // namespace

bool optimizer_option_is_bf16(const EngineSettings& engine, const char* key) {
  const PluginChoice& o = engine.optimizer;
  return o.chosen() && o.declares(key, ValueType::kString) && o.options.get_string(key) == "bf16";
}

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string config_value(const Config& config, const std::string& key) {
  const size_t dot = key.rfind('.');
  const std::string table = key.substr(0, dot), name = key.substr(dot + 1);
  const Options& o = table.rfind("plugin.", 0) == 0  ? config.plugin_options(table.substr(7))
                     : table.rfind("codec.", 0) == 0 ? config.codec_options(table.substr(6))
                                                     : config.section(table);
  return value_to_toml(o.get(name));
}

std::string composition_label(const JobSettings& job) {
  const EngineSettings& engine = job.engine;
  const EngineOptions& zero = engine.options;
  const int64_t stage = zero.stage;
  const std::string shard = engine.shard_stands_in ? "" : engine.shard.id;
  std::string label = "stage " + std::to_string(stage) + ", " + (shard.empty() ? "-" : shard);
  if (shard == "shard_bucket") {
    const double mb = engine.shard.options.get_double("bucket_mb");
    label += mb > 0 ? " " + short_number(mb) + " MiB" : "";
  }
  label += ", micro " + std::to_string(job.data.micro_batch) + " x accum " +
           std::to_string(job.data.grad_accum);
  if (stage >= 2 && zero.overlap_comm && zero.reduce_bucket_mb != 25)
    label += ", reduce bucket " + short_number(zero.reduce_bucket_mb) + " MiB";
  if (stage == 3) {
    label += ", prefetch " + std::to_string(zero.prefetch_units) + ", persist < " +
             std::to_string(zero.param_persistence_threshold);
  }
  const PluginChoice& opt = engine.offload_optimizer;
  const PluginChoice& param = engine.offload_param;
  const bool opt_on = stage >= 1 && opt.chosen() && zero.offload_optimizer_fraction > 0;
  const bool param_on = stage == 3 && param.chosen() && zero.offload_param_fraction > 0;
  if (!opt_on && !param_on) label += ", no offload";
  if (opt_on) label += ", optimizer " + percent(zero.offload_optimizer_fraction) + " " + opt.id;
  if (param_on) label += ", params " + percent(zero.offload_param_fraction) + " " + param.id;
  const PluginChoice* nvme = opt_on && opt.id == "offload_nvme"       ? &opt
                             : param_on && param.id == "offload_nvme" ? &param
                                                                      : nullptr;
  if (nvme) {
    if (opt_on) label += ", sub_group " + std::to_string(zero.sub_group_size);
    label += ", queue " + std::to_string(nvme->options.get_int("queue_depth"));
  }
  if (optimizer_option_is_bf16(engine, "state_dtype")) label += ", bf16 states";
  if (optimizer_option_is_bf16(engine, "master_dtype")) label += ", bf16 masters";
  if (stage >= 1 && engine.groups.size >= 0)
    label += ", MiCS " + std::to_string(engine.groups.size);
  auto codec = [&](const PluginChoice& c, const char* role) {
    if (!c.chosen()) return;
    label += std::string(", ") + role + " " + c.id;
    if (c.declares("bits", ValueType::kInt))
      label += " int" + std::to_string(c.options.get_int("bits"));
  };
  if (stage == 3) codec(engine.codec_weights, "weights");
  if (stage >= 1) codec(engine.codec_gradients, "gradients");
  if (stage >= 1 && engine.codec_gradients.chosen() && zero.codec_error_feedback)
    label += " + error feedback";
  if ((engine.codec_weights.chosen() || engine.codec_gradients.chosen()) &&
      engine.codecs_across_hosts_only)
    label += " across hosts";
  return label;
}

}  // namespace zt::trainer
