#include "tune/search_space.h"

#include <algorithm>
#include <cstdio>

#include "settings/job_settings.h"

namespace zt::trainer {

namespace {

const char* const kPlacementKeys[] = {
    "plugins.offload_optimizer=", "plugins.offload_param=", "zero.offload_optimizer_fraction=",
    "zero.offload_param_fraction="};

bool is_placement(const std::string& kv) {
  for (const char* key : kPlacementKeys) {
    if (kv.rfind(key, 0) == 0) return true;
  }
  return false;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// Offload placements of a stage: (optimizer tier, parameter tier), "" = none.
std::vector<std::pair<std::string, std::string>> placements(int stage) {
  if (stage == 0) return {{"", ""}};
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* opt : {"", "offload_cpu", "offload_nvme"}) {
    if (stage < 3) {
      out.push_back({opt, ""});
      continue;
    }
    for (const char* param : {"", "offload_cpu", "offload_nvme"}) out.push_back({opt, param});
  }
  return out;
}

void add_placement(std::vector<std::string>& o, const std::string& opt, const std::string& param) {
  o.push_back("plugins.offload_optimizer=" + quoted(opt));
  o.push_back("plugins.offload_param=" + quoted(param));
  if (!opt.empty()) o.push_back("zero.offload_optimizer_fraction=1.0");
  if (!param.empty()) o.push_back("zero.offload_param_fraction=1.0");
}

// `around` with `key=value` instead of what it set for `key` (or added).
Composition with(const Composition& around, const std::string& key, const std::string& value) {
  Composition c;
  c.origin = "around the leader";
  for (const std::string& kv : around.overrides) {
    if (kv.rfind(key + "=", 0) != 0) c.overrides.push_back(kv);
  }
  c.overrides.push_back(key + "=" + value);
  return c;
}

}  // namespace

std::string placement_of(const Composition& c) {
  std::string out;
  for (const std::string& kv : c.overrides) {
    if (is_placement(kv)) out += (out.empty() ? "" : ",") + kv;
  }
  return out;
}

std::string cell_of(const Composition& c) {
  std::string out;
  for (const std::string& kv : c.overrides) {
    if (!is_placement(kv)) out += (out.empty() ? "" : ",") + kv;
  }
  return out;
}

std::vector<Composition> composition_grid(const Config& config, int hosts) {
  const DataSettings data = JobSettings::of(config).data;
  const int64_t per_rank = data.micro_batch * data.grad_accum;
  std::vector<Composition> out;
  for (int stage = 0; stage <= 3; ++stage) {
    for (int64_t micro = 1; micro <= per_rank; ++micro) {
      if (per_rank % micro != 0) continue;
      // MiCS only where the world spans hosts: a group per host keeps gathers off the network.
      std::vector<int64_t> groups = {-1};
      if (hosts > 1 && stage >= 1) groups.push_back(0);
      for (int64_t group : groups) {
        for (const auto& [opt, param] : placements(stage)) {
          Composition c;
          c.origin = "grid";
          c.overrides = {"zero.stage=" + std::to_string(stage),
                         "data.micro_batch=" + std::to_string(micro),
                         "data.grad_accum=" + std::to_string(per_rank / micro)};
          if (hosts > 1 && stage >= 1)
            c.overrides.push_back("zero.mics_shard_size=" + std::to_string(group));
          add_placement(c.overrides, opt, param);
          out.push_back(std::move(c));
        }
      }
    }
  }
  return out;
}

std::vector<Composition> compositions_around(const Config& config, const Composition& around) {
  const Options& zero = config.section("zero");
  const Options& plugins = config.section("plugins");
  const int64_t stage = zero.get_int("stage");
  std::vector<Composition> out;
  const std::string& shard = plugins.get_string("shard");
  // The shard strategy and its bucket size.
  if (shard == "shard_bucket" || shard == "shard_tensor") {
    out.push_back(
        with(around, "plugins.shard", shard == "shard_bucket" ? "shard_tensor" : "shard_bucket"));
  }
  if (shard == "shard_bucket") {
    const double mb = config.plugin_options(shard).get_double("bucket_mb");
    for (double v : {0.0, 4.0, 50.0}) {
      if (v != mb) out.push_back(with(around, "plugin.shard_bucket.bucket_mb", short_number(v)));
    }
  }
  // Gradient bytes in flight before backward waits for them.
  if (stage >= 2 && zero.get_bool("overlap_comm")) {
    const double mb = zero.get_double("reduce_bucket_mb");
    for (double v : {mb / 5, mb * 4})
      out.push_back(with(around, "zero.reduce_bucket_mb", short_number(v)));
  }
  if (stage == 3) {
    const int64_t prefetch = zero.get_int("prefetch_units");
    for (int64_t v : {prefetch - 1, prefetch + 1}) {
      if (v >= 0 && v <= 4) out.push_back(with(around, "zero.prefetch_units", std::to_string(v)));
    }
    const int64_t persist = zero.get_int("param_persistence_threshold");
    for (int64_t v : {int64_t{0}, persist * 10}) {
      if (v != persist) {
        out.push_back(with(around, "zero.param_persistence_threshold", std::to_string(v)));
      }
    }
  }
  // Offload: the other tier and half the states, for each role in use.
  auto role = [&](const char* plugin_key, const char* fraction_key) {
    const std::string& tier = plugins.get_string(plugin_key);
    if (tier.empty()) return;
    const std::string other = tier == "offload_cpu" ? "offload_nvme" : "offload_cpu";
    out.push_back(with(around, std::string("plugins.") + plugin_key, quoted(other)));
    if (zero.get_double(fraction_key) > 0.5) {
      out.push_back(with(around, std::string("zero.") + fraction_key, "0.5"));
    }
  };
  if (stage >= 1) role("offload_optimizer", "offload_optimizer_fraction");
  if (stage == 3) role("offload_param", "offload_param_fraction");
  const bool nvme = plugins.get_string("offload_optimizer") == "offload_nvme" ||
                    (stage == 3 && plugins.get_string("offload_param") == "offload_nvme");
  if (nvme) {
    if (stage >= 1 && plugins.get_string("offload_optimizer") == "offload_nvme") {
      const int64_t tile = std::min<int64_t>(zero.get_int("sub_group_size"), 1 << 24);
      for (int64_t v : {tile / 4, tile * 4}) {
        if (v >= 4096) out.push_back(with(around, "zero.sub_group_size", std::to_string(v)));
      }
    }
    const int64_t depth = config.plugin_options("offload_nvme").get_int("queue_depth");
    for (int64_t v : {int64_t{4}, int64_t{32}}) {
      if (v != depth) {
        out.push_back(with(around, "plugin.offload_nvme.queue_depth", std::to_string(v)));
      }
    }
  }
  return out;
}

}  // namespace zt::trainer
