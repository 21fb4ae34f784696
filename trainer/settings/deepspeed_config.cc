#include "settings/deepspeed_config.h"
#include "settings/trainer_config.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "zt/error.h"
#include "zt/host/json_numbers.h"
#include "zt/host/rendezvous.h"

namespace zt::trainer {

namespace {

using json = nlohmann::json;

// Keys zt does not take, with why or the nearest zt key. Anything else unknown gets the general
// pointer to docs/deepspeed.md's table.
const std::map<std::string, std::string>& reasons() {
  static const std::map<std::string, std::string> k = {
      {"zero_optimization.stage3_max_reuse_distance",
       "zt releases a unit's parameters once it ran and gathers them again for backward (only "
       "the last unit keeps them across the turn); the nearest knobs are zero.prefetch_units "
       "and zero.max_live_parameters"},
      {"zero_optimization.stage3_gather_16bit_weights_on_model_save",
       "zt saves sharded checkpoints; `trainer export` writes the gathered weights"},
      {"zero_optimization.stage3_gather_fp16_weights_on_model_save",
       "zt saves sharded checkpoints; `trainer export` writes the gathered weights"},
      {"zero_optimization.round_robin_gradients",
       "zt reduces gradient groups in model order, with no round-robin layout"},
      {"zero_optimization.offload_param.max_in_cpu",
       "zt places parameter shards by zero.offload_param_fraction"},
      {"zero_optimization.reduce_scatter",
       "zt always reduce-scatters gradients at stages 1-3 (false is not supported)"},
      {"zero_optimization.allgather_partitions",
       "zt always all-gathers the updated shards (false is not supported)"},
      {"fp16.auto_cast", "zt runs every unit in precision.compute; there is no autocast"},
      {"optimizer.params.amsgrad", "optim_hybrid_adam has no AMSGrad"},
      {"prescale_gradients",
       "zt divides after the reduction; zero.gradient_predivide_factor splits it around it"},
      {"amp", "zt has no Apex AMP; use bf16 or fp16"},
      {"communication_data_type",
       "zt reduces in the compute dtype, 16-bit sums accumulating in fp32"},
      {"activation_checkpointing",
       "set model.activation_checkpointing in the zt config (zt recomputes whole units)"},
      {"checkpoint", "use the zt config's [checkpoint] section"},
      {"aio", "set [plugin.offload_nvme] queue_depth and block_kb in the zt config"},
      {"tensorboard", "zt writes every step to <run.out_dir>/metrics.jsonl"},
      {"wandb", "zt writes every step to <run.out_dir>/metrics.jsonl"},
      {"csv_monitor", "zt writes every step to <run.out_dir>/metrics.jsonl"},
      {"flops_profiler", "zt reports tokens/s and where a step's time goes"},
      {"comms_logger", "zt's summary counts every collective, with bytes"},
      {"elasticity", "zt resumes at another world size from a checkpoint instead"},
      {"pipeline", "zt is data parallel only"},
  };
  return k;
}

// A top-level DeepSpeed section zt has no use for, given as {"enabled": false, ...}.
bool switched_off(const std::string& key, const json& v) {
  static const std::set<std::string> sections = {
      "amp", "tensorboard", "wandb", "csv_monitor", "flops_profiler", "comms_logger", "elasticity"};
  return sections.count(key) && v.is_object() && v.contains("enabled") &&
         v["enabled"].is_boolean() && !v["enabled"].get<bool>();
}

class Reader {
 public:
  Reader(std::string name, bool lenient) : name_(std::move(name)), lenient_(lenient) {}

  // A later setting of the same key replaces the earlier (a scheduler's peak lr over the
  // optimizer's, as DeepSpeed applies them).
  void set(const std::string& zt_key, Value v, const std::string& ds_path) {
    for (auto& s : settings_) {
      if (s.key != zt_key) continue;
      s = {zt_key, std::move(v), name_ + ": " + ds_path};
      return;
    }
    settings_.push_back({zt_key, std::move(v), name_ + ": " + ds_path});
  }
  // A zt key two DeepSpeed sections feed (offload_optimizer and offload_param share one
  // [plugin.offload_nvme] and one [plugin.offload_cpu]): a second, different value is refused
  // naming both, not taken silently by whichever section came last.
  void set_shared(const std::string& zt_key, Value v, const std::string& ds_path) {
    for (const auto& s : settings_) {
      if (s.key != zt_key || s.value == v) continue;
      problems_.push_back(name_ + ": " + ds_path + " and " + s.origin.substr(name_.size() + 2) +
                          " set zt's " + zt_key +
                          " differently, and both roles use that one setting; give them the "
                          "same value");
      return;
    }
    set(zt_key, std::move(v), ds_path);
  }
  void refuse(const std::string& ds_path, const std::string& why) {
    const std::string line = name_ + ": " + ds_path + " is not supported by zt: " + why;
    if (lenient_) {
      warnings_.push_back(line + " (ignored: run.deepspeed_lenient)");
    } else {
      problems_.push_back(line);
      refused_ = true;
    }
  }
  void unknown(const std::string& ds_path) {
    const auto it = reasons().find(ds_path);
    refuse(ds_path, it != reasons().end() ? it->second
                                          : "zt has no such setting (docs/deepspeed.md lists "
                                            "the keys zt reads)");
  }
  void problem(const std::string& ds_path, const std::string& what) {
    problems_.push_back(name_ + ": " + ds_path + ": " + what);
  }
  void warn(const std::string& line) { warnings_.push_back(name_ + ": " + line); }
  // What the setting from `ds_path` needs of the resolved config (DeepSpeedCondition).
  void require(const std::string& ds_path, const std::string& zt_key, Value v,
               const std::string& why) {
    conditions_.push_back({name_ + ": " + ds_path, zt_key, std::move(v), why});
  }

  DeepSpeedSettings finish() {
    if (!problems_.empty()) {
      std::string all;
      for (const auto& p : problems_) all += (all.empty() ? "" : "\n") + p;
      // The hint only where it helps: lenient mode relaxes unsupported keys, not wrong values.
      throw ConfigError(all + (refused_ ? "\n(--deepspeed-lenient, or run.deepspeed_lenient "
                                          "= true, turns unsupported keys into warnings)"
                                        : ""));
    }
    return {settings_, warnings_, conditions_};
  }

 private:
  std::string name_;
  bool lenient_;
  std::vector<ConfigSetting> settings_;
  std::vector<std::string> warnings_, problems_;
  std::vector<DeepSpeedCondition> conditions_;
  bool refused_ = false;  // a problem lenient mode would have made a warning
};

bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

// {"enabled": true} ("auto" or anything else: not enabled here, the zt config decides).
bool enabled(const json& obj) {
  return obj.is_object() && obj.contains("enabled") && obj["enabled"].is_boolean() &&
         obj["enabled"].get<bool>();
}

// {"enabled": "auto"} (Hugging Face's): on or off as the zt config's own settings say.
bool enabled_is_auto(const json& obj) {
  return obj.is_object() && obj.contains("enabled") && is_auto(obj["enabled"]);
}

std::string kind_of(const json& v) { return v.type_name(); }

// Typed reads: a wrong type is a problem named by its path, and the read gives nullopt.
std::optional<bool> as_bool(Reader& r, const json& v, const std::string& path) {
  if (v.is_boolean()) return v.get<bool>();
  r.problem(path, "expected true or false, got " + kind_of(v) + " " + v.dump());
  return std::nullopt;
}
std::optional<double> as_number(Reader& r, const json& v, const std::string& path) {
  if (v.is_number()) return v.get<double>();
  r.problem(path, "expected a number, got " + kind_of(v) + " " + v.dump());
  return std::nullopt;
}
std::optional<int64_t> as_int(Reader& r, const json& v, const std::string& path) {
  // Whole numbers that fit int64 only: a cast of 3.3e109 or of an unsigned above INT64_MAX is
  // undefined or wraps (tests/fuzz's deepspeed_json target found the first).
  if (const std::optional<int64_t> i = json_integer<int64_t>(v)) return *i;
  if (v.is_number_integer()) {  // an unsigned above INT64_MAX
    r.problem(path,
              "expected an integer of at most " + std::to_string(INT64_MAX) + ", got " + v.dump());
    return std::nullopt;
  }
  constexpr double kTwo63 = 9223372036854775808.0;
  if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
      v.get<double>() >= -kTwo63 && v.get<double>() < kTwo63)
    return static_cast<int64_t>(v.get<double>());
  r.problem(path, "expected an integer, got " + kind_of(v) + " " + v.dump());
  return std::nullopt;
}
std::optional<std::string> as_string(Reader& r, const json& v, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  r.problem(path, "expected a string, got " + kind_of(v) + " " + v.dump());
  return std::nullopt;
}

// Keys whose "auto" (Hugging Face's) the zt config resolves: those zt reads.
bool auto_resolves(const std::string& key) {
  static const std::set<std::string> kMapped = {"train_batch_size",
                                                "train_micro_batch_size_per_gpu",
                                                "gradient_accumulation_steps",
                                                "gradient_clipping",
                                                "gradient_predivide_factor",
                                                "steps_per_print",
                                                "stage",
                                                "overlap_comm",
                                                "reduce_bucket_size",
                                                "allgather_bucket_size",
                                                "prefetch_bucket_size",
                                                "stage3_prefetch_bucket_size",
                                                "param_persistence_threshold",
                                                "stage3_param_persistence_threshold",
                                                "max_live_parameters",
                                                "stage3_max_live_parameters",
                                                "sub_group_size",
                                                "mics_shard_size",
                                                "enabled",
                                                "loss_scale",
                                                "initial_scale_power",
                                                "loss_scale_window",
                                                "hysteresis",
                                                "min_loss_scale",
                                                "lr",
                                                "betas",
                                                "eps",
                                                "weight_decay",
                                                "warmup_min_lr",
                                                "warmup_max_lr",
                                                "warmup_num_steps",
                                                "total_num_steps",
                                                "warmup_type",
                                                "warmup_min_ratio",
                                                "cos_min_ratio",
                                                "nvme_path",
                                                "pin_memory",
                                                "buffer_count",
                                                "buffer_size",
                                                "ratio"};
  return kMapped.count(key) > 0;
}

// Walks one JSON object: `on` handles the keys it knows (returning false for the others).
void each(Reader& r, const json& obj, const std::string& path,
          const std::function<bool(const std::string&, const json&, const std::string&)>& on) {
  if (!obj.is_object()) {
    r.problem(path, "expected an object, got " + kind_of(obj));
    return;
  }
  for (const auto& [key, value] : obj.items()) {
    const std::string sub = path.empty() ? key : path + "." + key;
    if (is_auto(value)) {
      // A key zt maps is left to the zt config; any other has nothing to resolve from.
      if (!auto_resolves(key)) r.unknown(sub);
      continue;
    }
    if (!on(key, value, sub)) r.unknown(sub);
  }
}

// Short names of DeepSpeed's stage3_* keys mean the same setting.
std::string without_stage3(const std::string& key) {
  return key.rfind("stage3_", 0) == 0 ? key.substr(7) : key;
}

// offload_optimizer / offload_param.
void read_offload(Reader& r, const json& obj, const std::string& path, bool optimizer) {
  const std::string role = optimizer ? "offload_optimizer" : "offload_param";
  std::string device = "none";
  if (obj.is_object() && obj.contains("device") && obj["device"].is_string())
    device = obj["device"].get<std::string>();
  each(r, obj, path, [&](const std::string& key, const json& v, const std::string& sub) {
    if (key == "device") {
      if (auto d = as_string(r, v, sub)) {
        static const std::map<std::string, std::string> kTier = {
            {"none", ""}, {"cpu", "offload_cpu"}, {"nvme", "offload_nvme"}};
        const auto it = kTier.find(*d);
        if (it == kTier.end()) r.problem(sub, "\"" + *d + "\" is none of none, cpu, nvme");
        else r.set("plugins." + role, it->second, sub);
      }
    } else if (key == "nvme_path") {
      // DeepSpeed reads it only for the nvme device.
      if (auto p = as_string(r, v, sub); p && device == "nvme")
        r.set_shared("plugin.offload_nvme.path", *p, sub);
    } else if (key == "pin_memory") {
      if (auto b = as_bool(r, v, sub); b && device == "cpu")
        r.set_shared("plugin.offload_cpu.pin_memory", *b, sub);
    } else if (key == "buffer_count" || key == "buffer_size") {
      // DeepSpeed's NVMe swapping stages everything through these; zt's tier moves aligned tiles
      // in place, and offload_nvme's bounce buffers serve unaligned transfers and tails only.
      // Mapped, a Hugging Face config's 4-5 x 1e8 elements held 1.5-1.9 GiB of host memory per rank
      // that nothing used (and the memory-fit check counted).
      if (as_int(r, v, sub) && device == "nvme") {
        r.warn(sub + " is not mapped: zt's offload_nvme reads and writes aligned tiles in place "
                     "(its bounce buffers, plugin.offload_nvme.buffer_count and buffer_mb, serve "
                     "unaligned transfers and tails only, and their defaults do)");
      }
    } else if (key == "ratio" && optimizer) {
      if (auto x = as_number(r, v, sub)) r.set("zero.offload_optimizer_fraction", *x, sub);
    } else if ((key == "pipeline_read" || key == "pipeline_write") && optimizer) {
      if (auto b = as_bool(r, v, sub)) r.set("zero." + key, *b, sub);
    } else if (key == "pipeline" && optimizer) {
      if (auto b = as_bool(r, v, sub)) {
        r.set("zero.pipeline_read", *b, sub);
        r.set("zero.pipeline_write", *b, sub);
      }
    } else if (key == "fast_init" && optimizer) {
      as_bool(r, v, sub);  // zt fills offloaded states tile by tile either way
    } else {
      return false;
    }
    return true;
  });
}

// The JSON's zero_optimization.stage: nullopt for "auto", which leaves it to the zt config.
using JsonStage = std::optional<int64_t>;

// Why a stage-3 key needs the resolved zero.stage = 3 (DeepSpeedCondition).
constexpr const char* kStageThreeOnly = "applies only at stage 3 (DeepSpeed ignores it below)";

// Whether `what` (a key, with its value) applies at the JSON's `stage`: at stage 3 yes; below it
// no, left out as DeepSpeed leaves it out (MiCS, hpZ, qwZ and qgZ are its stage-3 optimizer's
// alone), saying so; with "auto" the stage is not known here, and the key is refused: mapped, it
// was an error at a config's stage 2 that DeepSpeed ignores, and dropped, a silent exact run.
bool applies_at_stage(Reader& r, const std::string& sub, const std::string& what, JsonStage stage) {
  if (!stage) {
    r.problem(sub, what +
                       " applies only at stage 3 (DeepSpeed ignores it below), and "
                       "zero_optimization.stage = \"auto\" leaves the stage to the zt config: give "
                       "the stage in the JSON, or leave the key out");
    return false;
  }
  if (*stage == 3) return true;
  r.warn(what + " is ignored, as DeepSpeed ignores it below stage 3 (zero_optimization.stage is " +
         std::to_string(*stage) + ")");
  return false;
}

// ZeRO++: qwZ and qgZ are codec_blockq on the weight gather (int8) and on the gradient
// reduce-scatter (int4, all-to-all); hpZ's secondary partition of k ranks is nearest to MiCS
// groups of k (zt then shards the optimizer states over the group too, not the whole world).
void read_zero_plus_plus(Reader& r, const std::string& key, const json& v, const std::string& sub,
                         JsonStage stage) {
  if (key == "zero_hpz_partition_size") {
    const auto k = as_int(r, v, sub);
    if (!k || *k <= 1) return;  // 1 is DeepSpeed's "off"
    if (!applies_at_stage(r, sub, sub + " = " + std::to_string(*k), stage)) return;
    r.set("zero.mics_shard_size", *k, sub);
    r.require(sub, "zero.stage", int64_t{3}, kStageThreeOnly);
    r.warn(sub + " = " + std::to_string(*k) + " maps to zero.mics_shard_size = " +
           std::to_string(*k) + ": parameter gathers stay in groups of " + std::to_string(*k) +
           " ranks as with hpZ, but zt also shards the optimizer states and gradients over the "
           "group only (MiCS), so each rank holds world / " +
           std::to_string(*k) + " times hpZ's share of them");
    return;
  }
  const auto on = as_bool(r, v, sub);
  if (!on || !*on) return;
  // DeepSpeed's stage-3 optimizer alone reads qwZ and qgZ: below it the job trains exact.
  if (!applies_at_stage(r, sub, sub, stage)) return;
  const bool weights = key == "zero_quantized_weights";
  const std::string role = weights ? "weights" : "gradients";
  r.set("plugins.codec_" + role, std::string("codec_blockq"), sub);
  r.set("codec." + role + ".bits", int64_t{weights ? 8 : 4}, sub);
  r.require(sub, "zero.stage", int64_t{3}, kStageThreeOnly);
}

void read_zero(Reader& r, const json& obj, double element_bytes) {
  const std::string path = "zero_optimization";
  // The JSON's stage (DeepSpeed's default 0), which decides whether its MiCS and hpZ apply: in
  // any spelling zero.stage takes (3.0 is stage 3 there, and was 0 here).
  const JsonStage stage = [&]() -> JsonStage {
    if (!obj.is_object() || !obj.contains("stage")) return 0;
    const json& v = obj["stage"];
    if (v == "auto") return std::nullopt;
    if (const std::optional<int64_t> i = json_integer<int64_t>(v)) return *i;
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
        std::fabs(v.get<double>()) < 1e9)
      return static_cast<int64_t>(v.get<double>());
    return 0;
  }();
  auto bucket_mb = [&](const json& v, const std::string& sub, const std::string& zt_key) {
    // DeepSpeed counts elements; zt's buckets are MiB of the compute dtype.
    if (auto n = as_number(r, v, sub)) r.set(zt_key, *n * element_bytes / (1 << 20), sub);
  };
  each(r, obj, path, [&](const std::string& key, const json& v, const std::string& sub) {
    const std::string name = without_stage3(key);
    if (key == "stage") {
      if (auto n = as_int(r, v, sub)) r.set("zero.stage", *n, sub);
    } else if (key == "overlap_comm" || key == "mics_hierarchical_params_gather") {
      if (auto b = as_bool(r, v, sub)) r.set("zero." + key, *b, sub);
    } else if (key == "reduce_bucket_size") {
      bucket_mb(v, sub, "zero.reduce_bucket_mb");
    } else if (key == "allgather_bucket_size") {
      bucket_mb(v, sub, "zero.allgather_bucket_mb");
    } else if (name == "prefetch_bucket_size") {
      // DeepSpeed's 0 prefetches nothing; zt's prefetch_elements = 0 means "count units".
      if (auto n = as_int(r, v, sub)) {
        if (*n == 0) r.set("zero.prefetch_units", int64_t{0}, sub);
        else r.set("zero.prefetch_elements", *n, sub);
      }
    } else if (name == "param_persistence_threshold" || name == "max_live_parameters" ||
               key == "sub_group_size") {
      if (auto n = as_int(r, v, sub)) r.set("zero." + name, *n, sub);
    } else if (key == "mics_shard_size") {
      // DeepSpeed runs MiCS at stage 3 with a size above 0; 0 and -1 are flat ZeRO there (zt's
      // 0 is a host's ranks), and below stage 3 it ignores the key.
      const auto n = as_int(r, v, sub);
      if (n && (*n <= 0 || applies_at_stage(r, sub, sub + " = " + std::to_string(*n), stage))) {
        r.set("zero.mics_shard_size", *n > 0 ? *n : int64_t{-1}, sub);
        if (*n > 0) r.require(sub, "zero.stage", int64_t{3}, kStageThreeOnly);
      }
    } else if (key == "offload_optimizer" || key == "offload_param") {
      read_offload(r, v, sub, key == "offload_optimizer");
    } else if (key == "cpu_offload" || key == "cpu_offload_params") {
      // DeepSpeed's deprecated forms, read as it reads them, with its advice.
      const bool params = key == "cpu_offload_params";
      if (auto b = as_bool(r, v, sub); b && *b) {
        r.warn(sub + " is deprecated (as in DeepSpeed); use zero_optimization." +
               (params ? "offload_param" : "offload_optimizer") + ": {\"device\": \"cpu\"}");
        r.set(params ? "plugins.offload_param" : "plugins.offload_optimizer", "offload_cpu", sub);
      }
    } else if (key == "cpu_offload_use_pin_memory") {
      if (auto b = as_bool(r, v, sub)) {
        r.warn(sub + " is deprecated (as in DeepSpeed); use offload_optimizer / offload_param's "
                     "pin_memory");
        r.set("plugin.offload_cpu.pin_memory", *b, sub);
      }
    } else if (key == "zero_quantized_weights" || key == "zero_quantized_gradients" ||
               key == "zero_hpz_partition_size") {
      read_zero_plus_plus(r, key, v, sub, stage);
    } else if (key == "contiguous_gradients" || key == "elastic_checkpoint" ||
               key == "load_from_fp32_weights" || key == "ignore_unused_parameters") {
      // What zt always does: flat contiguous gradient buffers, checkpoints any world size
      // loads, fp32 masters saved and loaded, groups without gradients reduced as zeros.
      as_bool(r, v, sub);
    } else if ((key == "reduce_scatter" || key == "allgather_partitions") && v.is_boolean() &&
               v.get<bool>()) {
      // true is what zt does; false falls to the refusal below.
    } else if ((key == "round_robin_gradients" || name == "gather_16bit_weights_on_model_save" ||
                name == "gather_fp16_weights_on_model_save") &&
               v.is_boolean() && !v.get<bool>()) {
      // DeepSpeed's default, asking for nothing (full config dumps carry it); true is refused.
    } else {
      return false;
    }
    return true;
  });
  // hpZ's group and MiCS's are one setting in zt: both given is a contradiction, not a choice.
  const auto hpz = obj.find("zero_hpz_partition_size"), mics = obj.find("mics_shard_size");
  // DeepSpeed's mics_shard_size default is -1 (MiCS off), which full config dumps carry.
  // Below stage 3 DeepSpeed ignores both (and so does zt, saying so): nothing contradicts.
  if (stage == 3 && obj.is_object() && hpz != obj.end() && mics != obj.end() &&
      hpz->is_number_integer() && hpz->get<int64_t>() > 1 &&
      !(mics->is_number_integer() && mics->get<int64_t>() <= 0)) {
    r.problem(path, "zero_hpz_partition_size and mics_shard_size both set the group that "
                    "gathers parameters (zero.mics_shard_size in zt); keep one");
  }
}

void read_fp16(Reader& r, const json& obj) {
  const bool on = enabled(obj);
  // DeepSpeed's defaults for what the file leaves out, when fp16 is on.
  double power = 16, window = 1000, hysteresis = 2, min_scale = 1, loss_scale = 0;
  std::map<std::string, std::string> from;  // which of them the file gave
  each(r, obj, "fp16", [&](const std::string& key, const json& v, const std::string& sub) {
    std::optional<double> x;
    if (key == "enabled") {
      as_bool(r, v, sub);
      return true;
    }
    // zt's scaler is DeepSpeed's default: the tolerance is refilled when the scale grows.
    if (key == "consecutive_hysteresis") {
      if (as_bool(r, v, sub).value_or(false)) {
        r.problem(sub, "true is not supported: zt refills the overflows hysteresis tolerates "
                       "when the scale grows, as DeepSpeed's default (false) does");
      }
      return true;
    }
    if (key != "loss_scale" && key != "initial_scale_power" && key != "loss_scale_window" &&
        key != "hysteresis" && key != "min_loss_scale")
      return false;
    // Counts are whole numbers (2.5 was cut to 2, 1e30 cast out of range); the power's scale
    // must be a number (2^2000 is inf).
    const bool count = key == "loss_scale_window" || key == "hysteresis";
    if (count) {
      if (const std::optional<int64_t> n = as_int(r, v, sub)) x = static_cast<double>(*n);
    } else {
      x = as_number(r, v, sub);
    }
    if (x && key == "initial_scale_power" && (*x < 0 || *x > 127)) {
      r.problem(sub, "2^" + v.dump() +
                         " is no loss scale; give a power from 0 to 127 (fp32's "
                         "range; DeepSpeed's default is 16)");
      x.reset();
    }
    if (x && key == "loss_scale" && !(*x >= 0)) {
      // Only 0 means dynamic: a negative scale was taken for it without a word.
      r.problem(sub, v.dump() + " is no loss scale; give 0 (dynamic, DeepSpeed's default) or a "
                                "fixed scale above 0");
      x.reset();
    }
    if (x) {
      from[key] = sub;
      if (key == "loss_scale") loss_scale = *x;
      if (key == "initial_scale_power") power = *x;
      if (key == "loss_scale_window") window = *x;
      if (key == "hysteresis") hysteresis = *x;
      if (key == "min_loss_scale") min_scale = *x;
    }
    return true;
  });
  // "auto" (Hugging Face's): the zt config's precision.compute decides whether fp16 is on, and
  // the scaler's settings hold for when it is (they act only in fp16).
  const bool is_auto_on = enabled_is_auto(obj);
  if (!on && !is_auto_on) return;
  auto origin = [&](const std::string& key) {
    return from.count(key) ? from[key] : "fp16.enabled (DeepSpeed's default " + key + ")";
  };
  if (on) r.set("precision.compute", std::string("fp16"), "fp16.enabled");
  if (loss_scale > 0) {
    // A static scale: the dynamic scaler pinned at one value.
    for (const char* k : {"initial_scale", "min_scale", "max_scale"})
      r.set(std::string("precision.") + k, loss_scale, from["loss_scale"]);
    return;
  }
  r.set("precision.initial_scale", std::pow(2.0, power), origin("initial_scale_power"));
  // DeepSpeed's scale has no ceiling; zt's (precision.max_scale, 2^32) is raised to a first
  // scale above it.
  if (power > 32) r.set("precision.max_scale", std::pow(2.0, power), origin("initial_scale_power"));
  r.set("precision.growth_interval", static_cast<int64_t>(window), origin("loss_scale_window"));
  r.set("precision.hysteresis", static_cast<int64_t>(hysteresis), origin("hysteresis"));
  r.set("precision.min_scale", min_scale, origin("min_loss_scale"));
}

// DeepSpeed's bf16 section also keeps Adam's moments (bf16_optimizer_states) and the master
// weights and gradients (bf16_master_weights_and_grads) in bf16: optim_hybrid_adam's
// state_dtype and master_dtype. zt's reduced gradients stay fp32 either way (said as a warning).
constexpr const char* kWithBf16 =
    "keeps optimizer state in bf16 for bf16 training (DeepSpeed's bf16 section)";

void read_bf16(Reader& r, const json& obj, const std::string& path) {
  // The 16-bit states come with bf16 training ("auto": with the zt config's bf16, checked once
  // it is loaded); with bf16 off they are ignored, said as a warning, not applied to an fp32 job.
  const bool on = enabled(obj) || enabled_is_auto(obj);
  const auto ignored = [&](const std::string& sub) {
    r.warn(sub + " is ignored: " + path + ".enabled is false");
  };
  each(r, obj, path, [&](const std::string& key, const json& v, const std::string& sub) {
    const auto b = [&] { return as_bool(r, v, sub).value_or(false); };
    if (key == "enabled") {
      if (b()) r.set("precision.compute", std::string("bf16"), sub);
    } else if (key == "bf16_optimizer_states") {
      if (!b()) return true;
      if (!on) {
        ignored(sub);
        return true;
      }
      r.set("plugin.optim_hybrid_adam.state_dtype", std::string("bf16"), sub);
      r.require(sub, "precision.compute", std::string("bf16"), kWithBf16);
    } else if (key == "bf16_master_weights_and_grads") {
      if (!b()) return true;
      if (!on) {
        ignored(sub);
        return true;
      }
      r.set("plugin.optim_hybrid_adam.master_dtype", std::string("bf16"), sub);
      r.require(sub, "precision.compute", std::string("bf16"), kWithBf16);
      r.warn(sub + ": the master weights are kept in bf16 (rounded stochastically: "
                   "plugin.optim_hybrid_adam.master_rounding); zt's reduced gradients stay fp32");
    } else {
      return false;
    }
    return true;
  });
}

void read_optimizer(Reader& r, const json& obj) {
  if (!obj.is_object() || !obj.contains("type") || !obj["type"].is_string()) {
    r.problem("optimizer", "needs a \"type\" string (Adam or AdamW)");
    return;
  }
  std::string type = obj["type"].get<std::string>();
  std::string lower;
  for (char c : type) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower != "adam" && lower != "adamw") {
    r.refuse("optimizer.type \"" + type + "\"",
             "zt's optimizer plugin is optim_hybrid_adam (Adam and AdamW); another optimizer "
             "is a plugin of its own (docs/writing-plugins.md)");
    return;
  }
  r.set("plugins.optimizer", std::string("optim_hybrid_adam"), "optimizer.type");
  // DeepSpeed's Adam is AdamW unless adam_w_mode is false.
  bool adamw = true;
  std::string adamw_from = "optimizer.type";
  each(r, obj, "optimizer", [&](const std::string& key, const json& v, const std::string& sub) {
    if (key == "type") return true;
    if (key != "params") return false;
    each(r, v, sub, [&](const std::string& p, const json& pv, const std::string& psub) {
      const std::string target = "plugin.optim_hybrid_adam." + p;
      if (p == "lr" || p == "eps" || p == "weight_decay") {
        if (auto x = as_number(r, pv, psub)) r.set(target, *x, psub);
      } else if (p == "betas") {
        if (pv.is_array() && pv.size() == 2 && pv[0].is_number() && pv[1].is_number())
          r.set(target, std::vector<double>{pv[0].get<double>(), pv[1].get<double>()}, psub);
        else r.problem(psub, "expected [beta1, beta2], got " + pv.dump());
      } else if (p == "adam_w_mode") {
        if (auto b = as_bool(r, pv, psub)) {
          adamw = *b;
          adamw_from = psub;
        }
      } else if (p == "torch_adam" || p == "bias_correction") {
        // The same update either way (optim_hybrid_adam always corrects bias).
        if (auto b = as_bool(r, pv, psub); b && p == "bias_correction" && !*b)
          r.refuse(psub, "optim_hybrid_adam always corrects the moments' bias");
      } else if (p == "amsgrad" && pv.is_boolean() && !pv.get<bool>()) {
      } else {
        return false;
      }
      return true;
    });
    return true;
  });
  if (lower == "adamw" && !adamw) {
    r.problem(adamw_from, "AdamW with adam_w_mode false contradicts itself; use type Adam");
  }
  r.set("plugin.optim_hybrid_adam.adamw", lower == "adamw" || adamw, adamw_from);
}

void read_scheduler(Reader& r, const json& obj) {
  if (!obj.is_object() || !obj.contains("type") || !obj["type"].is_string()) {
    r.problem("scheduler", "needs a \"type\" string (WarmupLR, WarmupDecayLR or WarmupCosineLR)");
    return;
  }
  const std::string type = obj["type"].get<std::string>();
  const json params = obj.value("params", json::object());
  // Only these two: a misspelt "parms" left DeepSpeed's defaults (lr 1e-3, 1000 log warmup
  // steps) in place of the schedule the file meant, without a word.
  each(r, obj, "scheduler", [](const std::string& key, const json&, const std::string&) {
    return key == "type" || key == "params";
  });
  if (type != "WarmupLR" && type != "WarmupDecayLR" && type != "WarmupCosineLR") {
    r.refuse("scheduler.type \"" + type + "\"",
             "zt's schedules are WarmupLR, WarmupDecayLR and WarmupCosineLR (run.lr_schedule)");
    return;
  }
  const std::string at = "scheduler.type";
  const bool cosine = type == "WarmupCosineLR";
  // DeepSpeed's defaults for what the file leaves out. A Hugging Face "auto" is not left out:
  // it means the training arguments' value, which is the zt config's (the optimizer's lr, the
  // run's warmup and steps), so nothing is set for it; DeepSpeed's defaults in its place made
  // a job train at lr 1e-3 with 1000 steps of log warmup.
  const auto is_auto_param = [&](const char* key) {
    return params.is_object() && params.contains(key) && is_auto(params[key]);
  };
  double min_lr = 0, max_lr = 0.001, min_ratio = 0, cos_min = 0.0001;
  int64_t warmup = 1000, total = 0;
  std::string warmup_type = "log";
  each(r, params, "scheduler.params",
       [&](const std::string& key, const json& v, const std::string& sub) {
    if (key == "warmup_min_lr" && !cosine) min_lr = as_number(r, v, sub).value_or(min_lr);
    else if (key == "warmup_max_lr" && !cosine) max_lr = as_number(r, v, sub).value_or(max_lr);
    else if (key == "warmup_num_steps") warmup = as_int(r, v, sub).value_or(warmup);
    else if (key == "warmup_type") warmup_type = as_string(r, v, sub).value_or(warmup_type);
    else if (key == "total_num_steps" && type != "WarmupLR") total = as_int(r, v, sub).value_or(0);
    else if (key == "warmup_min_ratio" && cosine) min_ratio = as_number(r, v, sub).value_or(0);
    else if (key == "cos_min_ratio" && cosine) cos_min = as_number(r, v, sub).value_or(cos_min);
    else if (key == "last_batch_iteration") as_int(r, v, sub);  // zt resumes from checkpoints
    else return false;
    return true;
  });
  if (warmup_type != "log" && warmup_type != "linear") {
    r.problem("scheduler.params.warmup_type", "\"" + warmup_type + "\" is neither log nor linear");
  }
  r.set("run.lr_schedule",
        std::string(cosine                    ? "cosine"
                    : type == "WarmupDecayLR" ? "linear"
                                              : "constant"),
        at);
  // A setting's origin is the parameter it came from (an out-of-range value is named where it
  // is), or the type whose default it is.
  const auto origin = [&](const char* key) {
    return params.is_object() && params.contains(key) ? "scheduler.params." + std::string(key) : at;
  };
  if (!is_auto_param("warmup_num_steps"))
    r.set("run.warmup_steps", warmup, origin("warmup_num_steps"));
  if (!is_auto_param("warmup_type")) r.set("run.warmup_type", warmup_type, origin("warmup_type"));
  if (cosine) {
    if (!is_auto_param("warmup_min_ratio"))
      r.set("run.warmup_min_ratio", min_ratio, origin("warmup_min_ratio"));
    if (!is_auto_param("cos_min_ratio"))
      r.set("run.min_lr_ratio", cos_min, origin("cos_min_ratio"));
  } else {
    // WarmupLR / WarmupDecayLR set the peak lr themselves, over the optimizer's; "auto" leaves
    // the optimizer's (or the zt config's) lr the peak.
    const bool max_auto = is_auto_param("warmup_max_lr");
    if (!max_auto) r.set("plugin.optim_hybrid_adam.lr", max_lr, "scheduler.params.warmup_max_lr");
    if (max_auto && min_lr > 0) {
      r.problem("scheduler.params.warmup_min_lr",
                "is given with warmup_max_lr = \"auto\": zt starts the warmup at a fraction of "
                "the peak (run.warmup_min_ratio); give warmup_max_lr as a number, or set "
                "run.warmup_min_ratio in the zt config");
    } else if (!is_auto_param("warmup_min_lr")) {
      r.set("run.warmup_min_ratio", max_lr > 0 && !max_auto ? min_lr / max_lr : 0.0,
            origin("warmup_min_lr"));
    }
    // WarmupDecayLR decays to warmup_min_lr (DeepSpeed's min_lr + (max_lr - min_lr) * gamma);
    // WarmupLR never decays, so its floor is never reached.
    const bool floor_at_min = type == "WarmupDecayLR" && !max_auto &&
                              !is_auto_param("warmup_min_lr") && max_lr > 0;
    r.set("run.min_lr_ratio", floor_at_min ? min_lr / max_lr : 0.0,
          floor_at_min ? origin("warmup_min_lr") : at);
  }
  if (type != "WarmupLR") {
    // "auto": the zt config's run.decay_steps (by default 0: the run's steps). Left unset, not
    // set to 0: a Python loop has no run.steps, and the engine warns of a decay whose length
    // nobody set only where none is set (with 0 set here, the lr reached 0 at step 10 unsaid).
    if (is_auto_param("total_num_steps")) {
    } else if (total <= 0) {
      r.problem("scheduler.params.total_num_steps", type + " needs it (> 0)");
    } else {
      r.set("run.decay_steps", total, "scheduler.params.total_num_steps");
    }
  }
}

// DeepSpeed's rule: train_batch_size = micro batch x accumulation x world; two give the third.
void read_batch(Reader& r, const json& root, int world) {
  auto get = [&](const char* key) -> std::optional<int64_t> {
    if (!root.contains(key) || is_auto(root[key])) return std::nullopt;
    return as_int(r, root[key], key);
  };
  const auto total = get("train_batch_size"), micro = get("train_micro_batch_size_per_gpu"),
             accum = get("gradient_accumulation_steps");
  bool positive = true;
  for (const auto& [key, value] :
       {std::pair{"train_batch_size", total}, std::pair{"train_micro_batch_size_per_gpu", micro},
        std::pair{"gradient_accumulation_steps", accum}}) {
    if (value && *value < 1) {
      r.problem(key, std::to_string(*value) + " is not a count of samples or steps; give 1 or "
                                              "more, or leave it out");
      positive = false;
    } else if (value && *value > (int64_t{1} << 30)) {
      // Their product with the world size must stay inside int64.
      r.problem(key, std::to_string(*value) + " is past what zt takes (2^30)");
      positive = false;
    }
  }
  if (!positive) return;
  // The global batch is DeepSpeed's contract: kept as data.global_batch, a micro batch or an
  // accumulation the zt config or --set changes, or another world size at a resume, must still
  // make it (the job refuses what does not), instead of silently training on another batch.
  if (total) r.set("data.global_batch", *total, "train_batch_size");
  const std::string rule = "train_batch_size = train_micro_batch_size_per_gpu x "
                           "gradient_accumulation_steps x " +
                           std::to_string(world) + " ranks";
  auto derive = [&](int64_t dividend, int64_t divisor, const char* what) -> int64_t {
    if (divisor <= 0 || dividend % divisor != 0 || dividend / divisor < 1) {
      r.problem("train_batch_size",
                std::to_string(*total) + " does not divide into " + what + " (" + rule + ")");
      return 0;
    }
    return dividend / divisor;
  };
  int64_t m = micro.value_or(0), a = accum.value_or(0);
  if (total && micro && accum && *total != m * a * world) {
    r.problem("train_batch_size", std::to_string(*total) + " != " + std::to_string(m) + " x " +
                                      std::to_string(a) + " x " + std::to_string(world) +
                                      " ranks (" + rule + ")");
    return;
  }
  if (total && micro && !accum) a = derive(*total, m * world, "whole micro steps");
  if (total && accum && !micro) m = derive(*total, a * world, "whole micro batches");
  if (total && !micro && !accum) {
    a = 1;
    m = derive(*total, world, "one micro batch per rank");
  }
  if (m > 0)
    r.set("data.micro_batch", m,
          micro ? "train_micro_batch_size_per_gpu" : "train_batch_size (" + rule + ")");
  if (a > 0)
    r.set("data.grad_accum", a,
          accum ? "gradient_accumulation_steps" : "train_batch_size (" + rule + ")");
}

// "line L, column C" of byte `at` in `text`.
std::string line_column(const std::string& text, size_t at) {
  int line = 1, column = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

}  // namespace

DeepSpeedSettings read_deepspeed_json(const std::string& text, const std::string& name,
                                      bool lenient, int world) {
  json root;
  // A key given twice in one object: the parser keeps the last; DeepSpeed, and zt's TOML,
  // refuse it (a second "zero_optimization" silently dropped the first).
  std::vector<std::set<std::string>> keys_by_depth;
  std::vector<std::string> twice;
  const json::parser_callback_t note_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys_by_depth.emplace_back();
    if (event == json::parse_event_t::object_end && !keys_by_depth.empty())
      keys_by_depth.pop_back();
    if (event == json::parse_event_t::key && !keys_by_depth.empty() &&
        !keys_by_depth.back().insert(parsed.get<std::string>()).second)
      twice.push_back(parsed.get<std::string>());
    return true;
  };
  try {
    root = json::parse(text, note_keys);
  } catch (const json::parse_error& e) {
    std::string why = e.what();
    const size_t colon = why.find(": ", why.find("parse error"));
    throw ConfigError(
        name + ":" + line_column(text, e.byte > 0 ? e.byte - 1 : 0) + ": not valid JSON (" +
        (colon == std::string::npos ? why : why.substr(colon + 2)) + "); fix the DeepSpeed config");
  } catch (const json::exception& e) {
    // Not a syntax error but a value the parser cannot hold, e.g. 6e5555555555 (out_of_range:
    // tests/fuzz's deepspeed_json target found it escaping as a crash).
    throw ConfigError(name + ": not valid JSON (" + std::string(e.what()) +
                      "); fix the DeepSpeed config");
  }
  if (!twice.empty()) {
    throw ConfigError(name + ": \"" + twice.front() +
                      "\" is given twice in one object; keep one (JSON readers keep only the "
                      "last, DeepSpeed refuses it)");
  }
  Reader r(name, lenient);
  if (!root.is_object()) throw ConfigError(name + ": a DeepSpeed config is a JSON object");
  const bool fp16 = root.contains("fp16") && enabled(root["fp16"]);
  const bool bf16 = (root.contains("bf16") && enabled(root["bf16"])) ||
                    (root.contains("bfloat16") && enabled(root["bfloat16"]));
  if (fp16 && bf16) r.problem("fp16.enabled", "and bf16.enabled are both true; pick one");
  const double element_bytes = fp16 || bf16 ? 2 : 4;
  read_batch(r, root, world);
  each(r, root, "", [&](const std::string& key, const json& v, const std::string& sub) {
    if (key == "train_batch_size" || key == "train_micro_batch_size_per_gpu" ||
        key == "gradient_accumulation_steps") {
      return true;  // read_batch
    } else if (key == "zero_optimization") {
      read_zero(r, v, element_bytes);
    } else if (key == "fp16") {
      read_fp16(r, v);
    } else if (key == "bf16" || key == "bfloat16") {
      read_bf16(r, v, key);
    } else if (key == "optimizer") {
      read_optimizer(r, v);
    } else if (key == "scheduler") {
      read_scheduler(r, v);
    } else if (key == "gradient_clipping") {
      if (auto x = as_number(r, v, sub)) r.set("zero.gradient_clipping", *x, sub);
    } else if (key == "gradient_predivide_factor") {
      if (auto x = as_number(r, v, sub)) r.set("zero.gradient_predivide_factor", *x, sub);
    } else if (key == "steps_per_print") {
      if (auto n = as_int(r, v, sub)) r.set("run.log_every", *n, sub);
    } else if (key == "prescale_gradients" && v.is_boolean() && !v.get<bool>()) {
    } else if (switched_off(key, v)) {
      // A section that is off asks for nothing (full config dumps carry them all); on, it is
      // refused with its reason.
    } else if (key == "wall_clock_breakdown" || key == "memory_breakdown" ||
               key == "zero_allow_untested_optimizer" || key == "zero_force_ds_cpu_optimizer") {
      as_bool(r, v, sub);  // zt always reports time and memory; its optimizer is its own
    } else {
      return false;
    }
    return true;
  });
  return r.finish();
}

DeepSpeedSettings read_deepspeed_config(const std::string& path, bool lenient, int world) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError("the DeepSpeed config '" + path + "' (run.deepspeed / --deepspeed) is a " +
                      "folder; give its JSON file (e.g. ds_config.json)");
  }
  std::ifstream in(path);
  if (!in) {
    throw ConfigError("cannot read the DeepSpeed config '" + path +
                      "' (run.deepspeed / --deepspeed); give an existing JSON file");
  }
  std::stringstream text;
  text << in.rdbuf();
  return read_deepspeed_json(text.str(), path, lenient, world);
}

}  // namespace zt::trainer
