#include "tune/search_space.h"

#include <algorithm>
#include <cstdio>

#include "settings/job_settings.h"
#include "zt/host/compose.h"

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

// `around` with each `key=value` instead of what it set for `key` (or added).
Candidate with(const Candidate& around,
               const std::vector<std::pair<std::string, std::string>>& settings) {
  Candidate c;
  c.origin = "around the leader";
  for (const std::string& kv : around.overrides) {
    const bool replaced = std::any_of(settings.begin(), settings.end(), [&](const auto& s) {
      return kv.rfind(s.first + "=", 0) == 0;
    });
    if (!replaced) c.overrides.push_back(kv);
  }
  for (const auto& [key, value] : settings) c.overrides.push_back(key + "=" + value);
  return c;
}

Candidate with(const Candidate& around, const std::string& key, const std::string& value) {
  return with(around, {{key, value}});
}

// ZeRO++ across hosts (docs/codecs.md): int8 weights for the stage-3 gather, int4 gradients with
// error feedback for the reduce-scatter, each alone and both, coding only the collectives whose
// ranks span hosts. Like bf16 states they change the numbers, so --rtol decides (the final A/B
// reports a gap beyond it).
void add_codecs(const EngineSettings& engine, const Candidate& around,
                std::vector<Candidate>& out) {
  const int64_t stage = engine.options.stage;
  // A leader that codes already keeps its scope: one knob at a time.
  const bool codes = engine.codec_weights.chosen() || engine.codec_gradients.chosen();
  std::vector<std::pair<std::string, std::string>> scope;
  if (!codes) scope = {{"zero.codec_scope", quoted("across_hosts")}};
  std::vector<std::pair<std::string, std::string>> weights, gradients;
  // The stage-3 gather crosses hosts where the shard group is more than a host's ranks (the
  // estimate's launch.nproc, when the world spans hosts); MiCS groups of one host gather inside
  // it, where across_hosts codes nothing.
  const int64_t group = engine.groups.size;
  const bool gather_crosses = group < 0 || group > engine.launch.nproc;
  if (stage == 3 && gather_crosses && !engine.codec_weights.chosen())
    weights = {{"plugins.codec_weights", quoted("codec_blockq")}, {"codec.weights.bits", "8"}};
  if (stage >= 1 && !engine.codec_gradients.chosen()) {
    gradients = {{"plugins.codec_gradients", quoted("codec_blockq")},
                 {"codec.gradients.bits", "4"},
                 {"zero.codec_error_feedback", "true"}};
  }
  auto add = [&](std::vector<std::pair<std::string, std::string>> settings) {
    settings.insert(settings.end(), scope.begin(), scope.end());
    out.push_back(with(around, settings));
  };
  if (!weights.empty()) add(weights);
  if (!gradients.empty()) add(gradients);
  if (!weights.empty() && !gradients.empty()) {
    std::vector<std::pair<std::string, std::string>> both = weights;
    both.insert(both.end(), gradients.begin(), gradients.end());
    add(both);
  }
}

}  // namespace

std::string placement_of(const Candidate& c) {
  std::string out;
  for (const std::string& kv : c.overrides) {
    if (is_placement(kv)) out += (out.empty() ? "" : ",") + kv;
  }
  return out;
}

std::string cell_of(const Candidate& c) {
  std::string out;
  for (const std::string& kv : c.overrides) {
    if (!is_placement(kv)) out += (out.empty() ? "" : ",") + kv;
  }
  return out;
}

std::vector<Candidate> composition_grid(const JobSettings& job, int hosts) {
  const DataSettings& data = job.data;
  const int64_t per_rank = data.micro_batch * data.grad_accum;
  // A stage-0 job without a shard plugin: stages 1-3 need one (every one was refused).
  const bool add_shard = job.engine.shard_stands_in;
  // The MiCS group size under each name the job set: the grid's value under the other name
  // alone contradicted it (every composition refused), and stage 0 takes none.
  std::vector<std::string> group_keys;
  for (const char* key : {"zero.mics_shard_size", "zero.shard_group_size"}) {
    if (job.engine.places.is_set(key)) group_keys.push_back(key);
  }
  std::vector<Candidate> out;
  for (int stage = 0; stage <= 3; ++stage) {
    for (int64_t micro = 1; micro <= per_rank; ++micro) {
      if (per_rank % micro != 0) continue;
      // MiCS only where the world spans hosts: a group per host keeps gathers off the network.
      std::vector<int64_t> groups = {-1};
      if (hosts > 1 && stage >= 1) groups.push_back(0);
      for (int64_t group : groups) {
        for (const auto& [opt, param] : placements(stage)) {
          Candidate c;
          c.origin = "grid";
          c.overrides = {"zero.stage=" + std::to_string(stage),
                         "data.micro_batch=" + std::to_string(micro),
                         "data.grad_accum=" + std::to_string(per_rank / micro)};
          if (add_shard && stage >= 1)
            c.overrides.push_back("plugins.shard=" + quoted("shard_bucket"));
          if (hosts > 1 && stage >= 1 && group_keys.empty())
            c.overrides.push_back("zero.mics_shard_size=" + std::to_string(group));
          for (const std::string& key : group_keys) {
            const int64_t value = stage == 0 ? -1 : hosts > 1 ? group : job.engine.groups.size;
            c.overrides.push_back(key + "=" + std::to_string(value));
          }
          add_placement(c.overrides, opt, param);
          out.push_back(std::move(c));
        }
      }
    }
  }
  return out;
}

std::vector<Candidate> compositions_around(const JobSettings& job, const Candidate& around,
                                           int hosts) {
  const EngineSettings& engine = job.engine;
  const EngineOptions& zero = engine.options;
  const int64_t stage = zero.stage;
  std::vector<Candidate> out;
  const std::string shard = engine.shard_stands_in ? "" : engine.shard.id;
  // The shard strategy and its bucket size.
  if (shard == "shard_bucket" || shard == "shard_tensor") {
    out.push_back(
        with(around, "plugins.shard", shard == "shard_bucket" ? "shard_tensor" : "shard_bucket"));
  }
  if (shard == "shard_bucket") {
    const double mb = engine.shard.options.get_double("bucket_mb");
    for (double v : {0.0, 4.0, 50.0}) {
      if (v != mb) out.push_back(with(around, "plugin.shard_bucket.bucket_mb", short_number(v)));
    }
  }
  // Gradient bytes in flight before backward waits for them.
  if (stage >= 2 && zero.overlap_comm) {
    const double mb = zero.reduce_bucket_mb;
    for (double v : {mb / 5, mb * 4})
      out.push_back(with(around, "zero.reduce_bucket_mb", short_number(v)));
  }
  if (stage == 3) {
    const int64_t prefetch = zero.prefetch_units;
    for (int64_t v : {prefetch - 1, prefetch + 1}) {
      if (v >= 0 && v <= 4) out.push_back(with(around, "zero.prefetch_units", std::to_string(v)));
    }
    const int64_t persist = zero.param_persistence_threshold;
    for (int64_t v : {int64_t{0}, persist * 10}) {
      if (v != persist) {
        out.push_back(with(around, "zero.param_persistence_threshold", std::to_string(v)));
      }
    }
  }
  // Offload: the other tier and half the states, for each role in use.
  auto role = [&](const PluginChoice& tier, double fraction, const char* fraction_key) {
    if (!tier.chosen()) return;
    const std::string other = tier.id == "offload_cpu" ? "offload_nvme" : "offload_cpu";
    out.push_back(with(around, tier.key, quoted(other)));
    if (fraction > 0.5) out.push_back(with(around, std::string("zero.") + fraction_key, "0.5"));
  };
  if (stage >= 1) {
    role(engine.offload_optimizer, zero.offload_optimizer_fraction, "offload_optimizer_fraction");
  }
  if (stage == 3) role(engine.offload_param, zero.offload_param_fraction, "offload_param_fraction");
  const PluginChoice* nvme = engine.offload_optimizer.id == "offload_nvme"
                                 ? &engine.offload_optimizer
                             : stage == 3 && engine.offload_param.id == "offload_nvme"
                                 ? &engine.offload_param
                                 : nullptr;
  if (nvme) {
    if (stage >= 1 && engine.offload_optimizer.id == "offload_nvme") {
      const int64_t tile = std::min<int64_t>(zero.sub_group_size, 1 << 24);
      for (int64_t v : {tile / 4, tile * 4}) {
        if (v >= 4096) out.push_back(with(around, "zero.sub_group_size", std::to_string(v)));
      }
    }
    const int64_t depth = nvme->options.get_int("queue_depth");
    for (int64_t v : {int64_t{4}, int64_t{32}}) {
      if (v != depth) {
        out.push_back(with(around, "plugin.offload_nvme.queue_depth", std::to_string(v)));
      }
    }
  }
  // Optimizer states streamed from NVMe: the disk is the likely bound, and Adam's moments in
  // bf16 move 4 bytes per parameter less each way, bf16 master weights 2. The only knobs here
  // that change the numbers (within bf16's rounding): the final A/B compares their losses with
  // the config's and reports a change beyond --rtol instead of adopting one silently.
  const PluginChoice& opt = engine.optimizer;
  if (stage >= 1 && engine.offload_optimizer.id == "offload_nvme" &&
      zero.offload_optimizer_fraction > 0 && opt.chosen()) {
    // Knobs of optim_hybrid_adam's options, by their names: a plugin that declares them.
    for (const char* key : {"state_dtype", "master_dtype"}) {
      if (opt.declares(key, ValueType::kString) && !optimizer_option_is_bf16(engine, key))
        out.push_back(with(around, "plugin." + opt.id + "." + key, quoted("bf16")));
    }
  }
  // Ranks on several hosts: the link between them is the likely bound.
  if (hosts > 1) add_codecs(engine, around, out);
  return out;
}

}  // namespace zt::trainer
