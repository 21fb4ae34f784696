#include "tune/composition.h"

#include <cstdio>

#include "settings/job_settings.h"
#include "zt/options.h"

namespace zt::trainer {

namespace {

std::string percent(double share) { return short_number(share * 100) + "%"; }

}  // namespace

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string config_value(const Config& config, const std::string& key) {
  const size_t dot = key.rfind('.');
  const std::string table = key.substr(0, dot), name = key.substr(dot + 1);
  const Options& o = table.rfind("plugin.", 0) == 0 ? config.plugin_options(table.substr(7))
                                                    : config.section(table);
  return value_to_toml(o.get(name));
}

std::string composition_label(const Config& config) {
  const Options& zero = config.section("zero");
  const Options& plugins = config.section("plugins");
  const JobSettings settings = JobSettings::of(config);
  const int64_t stage = zero.get_int("stage");
  const std::string& shard = plugins.get_string("shard");
  std::string label = "stage " + std::to_string(stage) + ", " + (shard.empty() ? "-" : shard);
  if (shard == "shard_bucket") {
    const double mb = config.plugin_options(shard).get_double("bucket_mb");
    label += mb > 0 ? " " + short_number(mb) + " MiB" : "";
  }
  label += ", micro " + std::to_string(settings.data.micro_batch) + " x accum " +
           std::to_string(settings.data.grad_accum);
  if (stage >= 2 && zero.get_bool("overlap_comm") && zero.get_double("reduce_bucket_mb") != 25)
    label += ", reduce bucket " + short_number(zero.get_double("reduce_bucket_mb")) + " MiB";
  if (stage == 3) {
    label += ", prefetch " + std::to_string(zero.get_int("prefetch_units")) + ", persist < " +
             std::to_string(zero.get_int("param_persistence_threshold"));
  }
  const std::string& opt = plugins.get_string("offload_optimizer");
  const std::string& param = plugins.get_string("offload_param");
  const bool opt_on = stage >= 1 && !opt.empty() &&
                      zero.get_double("offload_optimizer_fraction") > 0;
  const bool param_on = stage == 3 && !param.empty() &&
                        zero.get_double("offload_param_fraction") > 0;
  if (!opt_on && !param_on) label += ", no offload";
  if (opt_on) {
    label += ", optimizer " + percent(zero.get_double("offload_optimizer_fraction")) + " " + opt;
  }
  if (param_on) {
    label += ", params " + percent(zero.get_double("offload_param_fraction")) + " " + param;
  }
  if ((opt_on && opt == "offload_nvme") || (param_on && param == "offload_nvme")) {
    if (opt_on) label += ", sub_group " + std::to_string(zero.get_int("sub_group_size"));
    label += ", queue " +
             std::to_string(config.plugin_options("offload_nvme").get_int("queue_depth"));
  }
  if (stage >= 1 && zero.get_int("mics_shard_size") >= 0)
    label += ", MiCS " + std::to_string(zero.get_int("mics_shard_size"));
  return label;
}

}  // namespace zt::trainer
