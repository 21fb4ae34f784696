#include "ab/ab_arms.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "settings/job_settings.h"
#include "zt/error.h"

namespace zt::trainer {

namespace {

std::string key_of(const std::string& override_text) {
  return override_text.substr(0, override_text.find('='));
}

std::string value_of(const std::string& override_text) {
  const size_t eq = override_text.find('=');
  return eq == std::string::npos ? "" : override_text.substr(eq + 1);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::map<std::string, std::string> values_by_key(const Arm& arm) {
  std::map<std::string, std::string> out;
  for (const std::string& o : arm.overrides) out[key_of(o)] = value_of(o);
  return out;
}

}  // namespace

Arm parse_arm(const std::string& name, const std::string& text, const std::string& flag) {
  Arm arm;
  arm.name = name;
  std::string item;
  int depth = 0;
  char quote = 0;
  auto finish = [&] {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ConfigError(flag + " '" + text + "': '" + item +
                        "' is not section.key=value (arms are comma-separated overrides, e.g. " +
                        flag + " plugins.shard=shard_bucket,zero.prefetch_units=2)");
    }
    arm.overrides.push_back(item);
    item.clear();
  };
  for (char c : text) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      finish();
      continue;
    }
    item += c;
  }
  if (!item.empty() || !text.empty()) finish();
  return arm;
}

std::vector<std::string> differing_keys(const Arm& a, const Arm& b) {
  const auto va = values_by_key(a), vb = values_by_key(b);
  std::vector<std::string> keys;
  for (const Arm* arm : {&a, &b}) {
    for (const std::string& o : arm->overrides) {
      const std::string key = key_of(o);
      const auto ia = va.find(key), ib = vb.find(key);
      const bool same = ia != va.end() && ib != vb.end() && ia->second == ib->second;
      if (!same && std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
  }
  return keys;
}

bool changes_math(const std::string& key, const std::vector<std::string>& optimizer_ids,
                  bool layout_is_math) {
  if (starts_with(key, "plugin.")) {
    const std::string id = key.substr(7, key.find('.', 7) - 7);
    if (std::find(optimizer_ids.begin(), optimizer_ids.end(), id) != optimizer_ids.end())
      return true;
    // Otherwise a shard plugin's option is layout, seen below.
    if (!layout_is_math) return false;
  }
  // Another world size makes another global batch (micro_batch x grad_accum x ranks). The
  // predivide factor divides gradients in the compute dtype before they are summed: rounded.
  if (key == "plugins.optimizer" || key == "zero.gradient_clipping" || key == "launch.nproc" ||
      key == "zero.gradient_predivide_factor" || key == "zero.no_weight_decay")
    return true;
  // A codec changes the values the ranks compute with and the gradients they average, and so
  // do its scope and its error feedback.
  if (starts_with(key, "plugins.codec_") || starts_with(key, "zero.codec_") ||
      starts_with(key, "codec."))
    return true;
  if (layout_is_math) {
    // Where bytes are kept (offload) and when they travel (prefetch, overlap, how many bytes
    // are in flight: each group is coded and rounded on its own) leave the values alone; the
    // layout of the groups does not.
    static const char* const kStillNeutral[] = {"plugins.offload_",
                                                "plugin.offload_",
                                                "zero.offload_",
                                                "zero.sub_group_size",
                                                "zero.pipeline_",
                                                "zero.gradients_in_tier",
                                                "zero.prefetch_",
                                                "zero.overlap_comm",
                                                "zero.max_live_parameters",
                                                "plugins.comm",
                                                "plugin.comm_",
                                                "zero.reduce_bucket_mb",
                                                "zero.allgather_bucket_mb"};
    const bool neutral = std::any_of(std::begin(kStillNeutral), std::end(kStillNeutral),
                                     [&](const char* p) { return starts_with(key, p); });
    if (!neutral && (starts_with(key, "zero.") || starts_with(key, "plugins.") ||
                     starts_with(key, "plugin."))) {
      return true;
    }
  }
  static const char* const kNeutralPrefixes[] = {"plugins.", "plugin.", "zero.", "launch.",
                                                 "checkpoint."};
  for (const char* prefix : kNeutralPrefixes) {
    if (starts_with(key, prefix)) return false;
  }
  static const char* const kNeutralKeys[] = {"run.name", "run.out_dir", "run.log_every"};
  return std::find(std::begin(kNeutralKeys), std::end(kNeutralKeys), key) == std::end(kNeutralKeys);
}

bool codes_collectives(const JobSettings& job) {
  return job.engine.codec_weights.chosen() || job.engine.codec_gradients.chosen();
}

const char* gradient_reduction(const JobSettings& job) {
  if (job.data.grad_accum <= 1 || job.engine.compute == "fp32") return "";
  return job.engine.options.stage < 2 ? "once" : "per micro step";
}

bool reductions_round_apart(const JobSettings& a, const JobSettings& b) {
  return std::string(gradient_reduction(a)) != gradient_reduction(b);
}

bool changes_math_between(const std::string& key, const std::vector<std::string>& optimizer_ids,
                          bool layout_is_math, const JobSettings& a, const JobSettings& b) {
  return changes_math(key, optimizer_ids, layout_is_math) ||
         (key == "zero.stage" && reductions_round_apart(a, b));
}

bool layout_changes_math(const JobSettings& job) {
  if (codes_collectives(job)) return true;
  const PluginChoice& optimizer = job.engine.optimizer;
  if (!optimizer.chosen()) return false;
  for (const OptionSpec& spec : optimizer.options.specs()) {
    if (spec.type != ValueType::kString) continue;
    const std::string& value = optimizer.options.get_string(spec.name);
    if (value != "bf16" && value != "fp16") continue;
    // X_dtype beside X_rounding = "nearest" rounds the same whatever the layout.
    const size_t at = spec.name.rfind("dtype");
    const std::string rounding = at == std::string::npos ? ""
                                                         : spec.name.substr(0, at) + "rounding";
    if (!rounding.empty() && optimizer.declares(rounding, ValueType::kString) &&
        optimizer.options.get_string(rounding) == "nearest")
      continue;
    return true;
  }
  return false;
}

std::string arm_label(const Arm& arm) {
  if (arm.overrides.empty()) return "baseline";
  std::string label;
  for (const std::string& o : arm.overrides) {
    // A name (shard_bucket, offload_nvme) says what it is; a number or a switch needs its key.
    const std::string value = value_of(o), key = key_of(o);
    const bool named = value != "true" && value != "false" &&
                       std::any_of(value.begin(), value.end(),
                                   [](char c) { return std::isalpha(c); });
    label += (label.empty() ? "" : ",") +
             (named ? value : key.substr(key.rfind('.') + 1) + "=" + value);
  }
  return label;
}

}  // namespace zt::trainer
