// DeepSpeed JSON configs read into zt settings, key by key: the fixtures in
// tests/fixtures/deepspeed follow DeepSpeed's documented examples (ZeRO-1/2/3, offload to cpu and
// nvme, fp16 and bf16, Hugging Face "auto" values, deprecated forms). Also the refusals, JSON
// syntax errors with line and column, the batch rule, and the TOML winning over the JSON.
#include <doctest/doctest.h>

#include <cmath>

#include <map>

#include "settings/deepspeed_config.h"
#include "settings/deepspeed_precedence.h"
#include "settings/job_settings.h"
#include "settings/trainer_config.h"
#include "zt/error.h"

namespace {

using zt::Value;

const std::string kDir = ZT_TEST_SOURCE_DIR "/tests/fixtures/deepspeed/";

struct Expected {
  std::string key;
  Value value;
  std::string origin;  // after "<file>: "
};

// Every setting is expected, with its value and origin, and nothing else is set.
void check_settings(const zt::trainer::DeepSpeedSettings& got, const std::string& file,
                    const std::vector<Expected>& expected) {
  std::map<std::string, const zt::ConfigSetting*> by_key;
  for (const auto& s : got.settings) by_key[s.key] = &s;
  for (const Expected& e : expected) {
    CAPTURE(e.key);
    REQUIRE(by_key.count(e.key) == 1);
    CHECK(zt::value_to_toml(by_key[e.key]->value) == zt::value_to_toml(e.value));
    CHECK(by_key[e.key]->origin == file + ": " + e.origin);
    by_key.erase(e.key);
  }
  for (const auto& [key, s] : by_key)
    FAIL_CHECK("unexpected setting " << key << " from " << s->origin);
}

std::string refusal(const std::string& text, int world = 2, bool lenient = false) {
  try {
    zt::trainer::read_deepspeed_json(text, "ds.json", lenient, world);
  } catch (const zt::ConfigError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("DeepSpeed ZeRO-1 with fp16, Adam and WarmupLR, key by key") {
  const std::string f = kDir + "zero1_fp16_warmup.json";
  const auto s = zt::trainer::read_deepspeed_config(f, false, 4);
  const std::string rule = "train_batch_size (train_batch_size = train_micro_batch_size_per_gpu x "
                           "gradient_accumulation_steps x 4 ranks)";
  check_settings(s, f,
                 {{"data.micro_batch", int64_t{4}, rule},
                  {"data.grad_accum", int64_t{2}, "gradient_accumulation_steps"},
                  {"data.global_batch", int64_t{32}, "train_batch_size"},
                  {"run.log_every", int64_t{10}, "steps_per_print"},
                  {"plugins.optimizer", std::string("optim_hybrid_adam"), "optimizer.type"},
                  {"plugin.optim_hybrid_adam.betas", std::vector<double>{0.8, 0.999},
                   "optimizer.params.betas"},
                  {"plugin.optim_hybrid_adam.eps", 1e-8, "optimizer.params.eps"},
                  {"plugin.optim_hybrid_adam.weight_decay", 3e-7, "optimizer.params.weight_decay"},
                  // WarmupLR sets the peak lr over the optimizer's, as DeepSpeed does.
                  {"plugin.optim_hybrid_adam.lr", 0.001, "scheduler.params.warmup_max_lr"},
                  {"plugin.optim_hybrid_adam.adamw", true, "optimizer.type"},
                  {"run.lr_schedule", std::string("constant"), "scheduler.type"},
                  {"run.warmup_steps", int64_t{1000}, "scheduler.params.warmup_num_steps"},
                  {"run.warmup_type", std::string("log"), "scheduler.type"},
                  {"run.warmup_min_ratio", 0.0, "scheduler.params.warmup_min_lr"},
                  {"run.min_lr_ratio", 0.0, "scheduler.type"},
                  {"zero.gradient_clipping", 1.0, "gradient_clipping"},
                  {"precision.compute", std::string("fp16"), "fp16.enabled"},
                  {"precision.initial_scale", 65536.0, "fp16.initial_scale_power"},
                  {"precision.growth_interval", int64_t{1000}, "fp16.loss_scale_window"},
                  {"precision.hysteresis", int64_t{2}, "fp16.hysteresis"},
                  {"precision.min_scale", 1.0, "fp16.min_loss_scale"},
                  {"zero.stage", int64_t{1}, "zero_optimization.stage"},
                  // 5e8 fp16 elements = 953.67 MiB.
                  {"zero.reduce_bucket_mb", 500000000.0 * 2 / (1 << 20),
                   "zero_optimization.reduce_bucket_size"}});
  CHECK(s.warnings.empty());
}

TEST_CASE("DeepSpeed ZeRO-2 with bf16, CPU offload and AdamW, key by key") {
  const std::string f = kDir + "zero2_offload_cpu.json";
  const auto s = zt::trainer::read_deepspeed_config(f, false, 2);
  const double mb = 200000000.0 * 2 / (1 << 20);
  check_settings(
      s, f,
      {{"data.micro_batch", int64_t{4}, "train_micro_batch_size_per_gpu"},
       {"data.grad_accum", int64_t{1}, "gradient_accumulation_steps"},
       {"precision.compute", std::string("bf16"), "bf16.enabled"},
       {"zero.stage", int64_t{2}, "zero_optimization.stage"},
       {"zero.allgather_bucket_mb", mb, "zero_optimization.allgather_bucket_size"},
       {"zero.overlap_comm", true, "zero_optimization.overlap_comm"},
       {"zero.reduce_bucket_mb", mb, "zero_optimization.reduce_bucket_size"},
       {"plugins.offload_optimizer", std::string("offload_cpu"),
        "zero_optimization.offload_optimizer.device"},
       {"plugin.offload_cpu.pin_memory", true, "zero_optimization.offload_optimizer.pin_memory"},
       {"plugins.optimizer", std::string("optim_hybrid_adam"), "optimizer.type"},
       {"plugin.optim_hybrid_adam.lr", 0.0003, "optimizer.params.lr"},
       {"plugin.optim_hybrid_adam.weight_decay", 0.01, "optimizer.params.weight_decay"},
       {"plugin.optim_hybrid_adam.adamw", true, "optimizer.type"}});
}

TEST_CASE("DeepSpeed ZeRO-3 with NVMe offload of states and parameters, key by key") {
  const std::string f = kDir + "zero3_offload_nvme.json";
  const auto s = zt::trainer::read_deepspeed_config(f, false, 2);
  const std::string z = "zero_optimization.";
  check_settings(
      s, f,
      {{"data.global_batch", int64_t{16}, "train_batch_size"},
       {"data.micro_batch", int64_t{8}, "train_micro_batch_size_per_gpu"},
       {"data.grad_accum", int64_t{1},
        "train_batch_size (train_batch_size = train_micro_batch_size_per_gpu x "
        "gradient_accumulation_steps x 2 ranks)"},
       {"zero.stage", int64_t{3}, z + "stage"},
       {"zero.max_live_parameters", int64_t{1000000000}, z + "stage3_max_live_parameters"},
       {"zero.prefetch_elements", int64_t{50000000}, z + "stage3_prefetch_bucket_size"},
       {"zero.param_persistence_threshold", int64_t{100000},
        z + "stage3_param_persistence_threshold"},
       {"zero.sub_group_size", int64_t{1000000000}, z + "sub_group_size"},
       // fp32: 1e7 elements of 4 bytes.
       {"zero.reduce_bucket_mb", 10000000.0 * 4 / (1 << 20), z + "reduce_bucket_size"},
       {"plugins.offload_optimizer", std::string("offload_nvme"), z + "offload_optimizer.device"},
       {"plugins.offload_param", std::string("offload_nvme"), z + "offload_param.device"},
       // Both tiers name the same folder; the param's, read last, stands.
       {"plugin.offload_nvme.path", std::string("/local_nvme"), z + "offload_param.nvme_path"},
       {"zero.offload_optimizer_fraction", 0.5, z + "offload_optimizer.ratio"}});
  // DeepSpeed's staging buffers (4, and 5 of 1e8 elements) are not zt's: mapped, they held
  // 1.9 GiB of host memory per rank for unaligned transfers the engine does not make. Each of
  // the three keys is said as not mapped.
  int unmapped = 0;
  for (const std::string& w : s.warnings) {
    if (has(w, "is not mapped: zt's offload_nvme reads and writes aligned tiles in place"))
      ++unmapped;
  }
  CHECK(unmapped == 3);
}

TEST_CASE(
    "Hugging Face \"auto\" values leave keys to the zt config, unsupported keys are refused") {
  const std::string f = kDir + "zero3_hf_auto_cosine.json";
  const std::string refused = [&] {
    try {
      zt::trainer::read_deepspeed_config(f, false, 4);
    } catch (const zt::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK(has(refused, f + ": zero_optimization.stage3_gather_16bit_weights_on_model_save is not "
                         "supported by zt: zt saves sharded checkpoints; `trainer export`"));
  CHECK(has(refused, "--deepspeed-lenient"));
  const auto s = zt::trainer::read_deepspeed_config(f, true, 4);
  REQUIRE(s.warnings.size() == 1);
  CHECK(has(s.warnings[0], "(ignored: run.deepspeed_lenient)"));
  check_settings(s, f,
                 {{"plugins.optimizer", std::string("optim_hybrid_adam"), "optimizer.type"},
                  {"plugin.optim_hybrid_adam.adamw", true, "optimizer.type"},
                  {"run.lr_schedule", std::string("cosine"), "scheduler.type"},
                  {"run.warmup_steps", int64_t{20}, "scheduler.params.warmup_num_steps"},
                  {"run.warmup_type", std::string("linear"), "scheduler.params.warmup_type"},
                  {"run.warmup_min_ratio", 0.0, "scheduler.type"},
                  {"run.min_lr_ratio", 0.0001, "scheduler.type"},
                  {"run.decay_steps", int64_t{200}, "scheduler.params.total_num_steps"},
                  {"zero.stage", int64_t{3}, "zero_optimization.stage"},
                  {"zero.overlap_comm", true, "zero_optimization.overlap_comm"},
                  {"zero.mics_shard_size", int64_t{2}, "zero_optimization.mics_shard_size"}});
}

TEST_CASE("DeepSpeed's deprecated cpu_offload forms still work, with its advice as warnings") {
  const std::string f = kDir + "deprecated_cpu_offload.json";
  const auto s = zt::trainer::read_deepspeed_config(f, false, 2);
  REQUIRE(s.warnings.size() == 2);
  CHECK(has(s.warnings[0], "zero_optimization.cpu_offload is deprecated (as in DeepSpeed); use "
                           "zero_optimization.offload_optimizer: {\"device\": \"cpu\"}"));
  check_settings(
      s, f,
      {{"data.micro_batch", int64_t{2}, "train_micro_batch_size_per_gpu"},
       {"zero.stage", int64_t{2}, "zero_optimization.stage"},
       {"plugins.offload_optimizer", std::string("offload_cpu"), "zero_optimization.cpu_offload"},
       {"plugin.offload_cpu.pin_memory", false, "zero_optimization.cpu_offload_use_pin_memory"},
       {"run.lr_schedule", std::string("linear"), "scheduler.type"},
       {"run.warmup_steps", int64_t{10}, "scheduler.params.warmup_num_steps"},
       {"run.warmup_type", std::string("log"), "scheduler.type"},
       {"plugin.optim_hybrid_adam.lr", 0.001, "scheduler.params.warmup_max_lr"},
       {"run.warmup_min_ratio", 0.1, "scheduler.params.warmup_min_lr"},
       // WarmupDecayLR ends at warmup_min_lr: min_lr + (max_lr - min_lr) x gamma, as DeepSpeed.
       {"run.min_lr_ratio", 0.1, "scheduler.params.warmup_min_lr"},
       {"run.decay_steps", int64_t{100}, "scheduler.params.total_num_steps"}});
}

TEST_CASE("DeepSpeed configs zt cannot take: named, with why, all at once") {
  const std::string e = refusal(R"({"amp": {"enabled": true},
    "optimizer": {"type": "Lamb", "params": {"lr": 0.1}},
    "zero_optimization": {"stage": "three", "reduce_scatter": false},
    "no_such_key": 1})");
  CHECK(has(e, "ds.json: amp is not supported by zt: zt has no Apex AMP; use bf16 or fp16"));
  CHECK(has(e, "ds.json: optimizer.type \"Lamb\" is not supported by zt: zt's optimizer plugin is "
               "optim_hybrid_adam"));
  CHECK(has(e, "ds.json: zero_optimization.stage: expected an integer, got string \"three\""));
  CHECK(has(e, "zero_optimization.reduce_scatter is not supported by zt: zt always "
               "reduce-scatters"));
  CHECK(has(e, "ds.json: no_such_key is not supported by zt: zt has no such setting"));
  CHECK(has(refusal(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})"),
            "fp16.enabled: and bf16.enabled are both true; pick one"));
  // "auto" on a key zt does not read has nothing to resolve from.
  CHECK(has(refusal(R"({"communication_data_type": "auto"})"),
            "communication_data_type is not supported by zt: zt reduces in the compute dtype"));
}

TEST_CASE("DeepSpeed sections that are off, and keys at DeepSpeed's default, ask for nothing") {
  // What full config dumps carry: taken, setting nothing; the same sections on are refused.
  const auto s = zt::trainer::read_deepspeed_json(
      R"({"amp": {"enabled": false}, "tensorboard": {"enabled": false, "output_path": "tb"},
          "wandb": {"enabled": false}, "csv_monitor": {"enabled": false},
          "flops_profiler": {"enabled": false, "profile_step": 1},
          "comms_logger": {"enabled": false}, "elasticity": {"enabled": false},
          "zero_optimization": {"stage": 2, "round_robin_gradients": false,
                                "stage3_gather_16bit_weights_on_model_save": false}})",
      "ds.json", false, 2);
  CHECK(s.warnings.empty());
  REQUIRE(s.settings.size() == 1);
  CHECK(s.settings[0].key == "zero.stage");
  CHECK(has(refusal(R"({"wandb": {"enabled": true}})"), "wandb is not supported by zt"));
  CHECK(has(refusal(R"({"zero_optimization": {"round_robin_gradients": true}})"),
            "zero_optimization.round_robin_gradients is not supported by zt"));
}

TEST_CASE("DeepSpeed ZeRO++: qwZ and qgZ are codec_blockq at 8 and 4 bits, hpZ a MiCS group") {
  const std::string z = "zero_optimization.";
  const auto s = zt::trainer::read_deepspeed_json(
      R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3,
          "zero_quantized_weights": true, "zero_quantized_gradients": true,
          "zero_hpz_partition_size": 4}})",
      "ds.json", false, 8);
  check_settings(
      s, "ds.json",
      {{"data.micro_batch", int64_t{2}, "train_micro_batch_size_per_gpu"},
       {"zero.stage", int64_t{3}, z + "stage"},
       {"plugins.codec_weights", std::string("codec_blockq"), z + "zero_quantized_weights"},
       {"codec.weights.bits", int64_t{8}, z + "zero_quantized_weights"},
       {"plugins.codec_gradients", std::string("codec_blockq"), z + "zero_quantized_gradients"},
       {"codec.gradients.bits", int64_t{4}, z + "zero_quantized_gradients"},
       {"zero.mics_shard_size", int64_t{4}, z + "zero_hpz_partition_size"}});
  REQUIRE(s.warnings.size() == 1);
  CHECK(has(s.warnings[0], "zero_hpz_partition_size = 4 maps to zero.mics_shard_size = 4"));
  CHECK(has(s.warnings[0], "each rank holds world / 4 times hpZ's share"));
  // Off is nothing: false, and hpZ's default 1.
  const auto off = zt::trainer::read_deepspeed_json(
      R"({"zero_optimization": {"zero_quantized_weights": false, "zero_hpz_partition_size": 1}})",
      "ds.json", false, 2);
  CHECK(off.settings.empty());
  // Below stage 3 (and with no stage: DeepSpeed's 0) DeepSpeed trains exact: so does zt, saying so.
  for (const std::string stage : {R"("stage": 2, )", ""}) {
    CAPTURE(stage);
    const auto below = zt::trainer::read_deepspeed_json(
        std::string(R"({"zero_optimization": {)") + stage +
            R"("zero_quantized_weights": true, "zero_quantized_gradients": true}})",
        "ds.json", false, 2);
    for (const auto& setting : below.settings)
      CHECK(setting.key.find("codec") == std::string::npos);
    REQUIRE(below.warnings.size() == 2);  // in the JSON's key order
    CHECK(has(below.warnings[0], "zero_quantized_gradients is ignored"));
    CHECK(has(below.warnings[1], "zero_quantized_weights is ignored, as DeepSpeed ignores it below "
                                 "stage 3"));
  }
  // hpZ and MiCS both name the gather group: refused by name.
  CHECK(has(refusal(R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2,
                        "mics_shard_size": 4}})"),
            "zero_optimization: zero_hpz_partition_size and mics_shard_size both set the group"));
  // Below stage 3 both are ignored, as DeepSpeed ignores them: no contradiction to refuse.
  const auto both_below = zt::trainer::read_deepspeed_json(
      R"({"zero_optimization": {"stage": 2, "zero_hpz_partition_size": 8,
                                "mics_shard_size": 4}})",
      "ds.json", false, 2);
  REQUIRE(both_below.warnings.size() == 2);
  CHECK(has(both_below.warnings[0], "mics_shard_size = 4 is ignored"));
  CHECK(has(both_below.warnings[1], "zero_hpz_partition_size = 8 is ignored"));
  // "auto" leaves the stage to the zt config, where these apply only at 3: refused by name,
  // not dropped with "stage is 0" (the config's stage may be 3) nor mapped (an error at 2).
  for (const std::string key :
       {R"("zero_quantized_weights": true)", R"("zero_quantized_gradients": true)",
        R"("zero_hpz_partition_size": 8)", R"("mics_shard_size": 4)"}) {
    CAPTURE(key);
    CHECK(has(refusal(R"({"zero_optimization": {"stage": "auto", )" + key + "}}"),
              "applies only at stage 3 (DeepSpeed ignores it below), and "
              "zero_optimization.stage = \"auto\" leaves the stage to the zt config: give the "
              "stage in the JSON"));
  }
  // MiCS's "off" (-1, DeepSpeed's default, which full config dumps carry) is no contradiction.
  const auto dump = zt::trainer::read_deepspeed_json(
      R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2,
                                "mics_shard_size": -1}})",
      "ds.json", false, 2);
  std::map<std::string, std::string> got;
  for (const auto& setting : dump.settings) got[setting.key] = zt::value_to_toml(setting.value);
  CHECK(got["zero.mics_shard_size"] == "2");
}

TEST_CASE("offload_optimizer and offload_param share zt's one tier table: no silent last word") {
  const std::string both = R"({"zero_optimization": {"stage": 3,
    "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme0"},
    "offload_param": {"device": "nvme", "nvme_path": "/nvme1"}}})";
  const std::string e = refusal(both);
  CHECK(has(e, "zero_optimization.offload_param.nvme_path and "
               "zero_optimization.offload_optimizer.nvme_path set zt's plugin.offload_nvme.path "
               "differently"));
  // nvme_path is read only for the nvme device (DeepSpeed's rule): a cpu tier's is no table.
  const auto cpu = zt::trainer::read_deepspeed_json(
      R"({"zero_optimization": {"stage": 2,
          "offload_optimizer": {"device": "cpu", "nvme_path": "/nvme0"}}})",
      "ds.json", false, 2);
  for (const auto& setting : cpu.settings) CHECK(setting.key != "plugin.offload_nvme.path");
}

TEST_CASE("fp16 \"auto\" keeps its loss scaler settings for when the zt config computes in fp16") {
  const auto s = zt::trainer::read_deepspeed_json(
      R"({"fp16": {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 12,
                   "loss_scale_window": 500, "hysteresis": 3, "min_loss_scale": 2}})",
      "ds.json", false, 2);
  std::map<std::string, std::string> got;
  for (const auto& setting : s.settings) got[setting.key] = zt::value_to_toml(setting.value);
  CHECK(got.count("precision.compute") == 0);  // the zt config's
  CHECK(got["precision.initial_scale"] == zt::value_to_toml(4096.0));
  CHECK(got["precision.growth_interval"] == "500");
  CHECK(got["precision.hysteresis"] == "3");
  CHECK(got["precision.min_scale"] == zt::value_to_toml(2.0));
  // A first scale above zt's ceiling raises the ceiling (DeepSpeed has none).
  const auto high = zt::trainer::read_deepspeed_json(
      R"({"fp16": {"enabled": true, "initial_scale_power": 40}})", "ds.json", false, 2);
  got.clear();
  for (const auto& setting : high.settings) got[setting.key] = zt::value_to_toml(setting.value);
  CHECK(got["precision.max_scale"] == zt::value_to_toml(std::pow(2.0, 40)));
  // The cosine schedule's "auto" ratios are the zt config's, not refused.
  const auto cosine = zt::trainer::read_deepspeed_json(
      R"({"scheduler": {"type": "WarmupCosineLR",
          "params": {"total_num_steps": 10, "cos_min_ratio": "auto",
                     "warmup_min_ratio": "auto", "warmup_type": "auto"}}})",
      "ds.json", false, 2);
  got.clear();
  for (const auto& setting : cosine.settings) got[setting.key] = zt::value_to_toml(setting.value);
  CHECK(got.count("run.min_lr_ratio") == 0);
  CHECK(got.count("run.warmup_type") == 0);
}

TEST_CASE("bf16's 16-bit states are ignored, with a warning, when bf16 is off") {
  const auto s = zt::trainer::read_deepspeed_json(
      R"({"bf16": {"enabled": false, "bf16_optimizer_states": true,
                   "bf16_master_weights_and_grads": true}})",
      "ds.json", false, 2);
  CHECK(s.settings.empty());
  REQUIRE(s.warnings.size() == 2);
  CHECK(has(s.warnings[0], "bf16.bf16_master_weights_and_grads is ignored: bf16.enabled is false"));
}

TEST_CASE("DeepSpeed's bf16 optimizer states and master weights are optim_hybrid_adam's dtypes") {
  const auto s = zt::trainer::read_deepspeed_json(
      R"({"bf16": {"enabled": true, "bf16_optimizer_states": true,
                   "bf16_master_weights_and_grads": true}})",
      "ds.json", false, 2);
  check_settings(
      s, "ds.json",
      {{"precision.compute", std::string("bf16"), "bf16.enabled"},
       {"plugin.optim_hybrid_adam.state_dtype", std::string("bf16"), "bf16.bf16_optimizer_states"},
       {"plugin.optim_hybrid_adam.master_dtype", std::string("bf16"),
        "bf16.bf16_master_weights_and_grads"}});
  REQUIRE(s.warnings.size() == 1);
  CHECK(has(s.warnings[0], "zt's reduced gradients stay fp32"));
  // false sets nothing; a key DeepSpeed's bf16 section does not have is refused by name.
  const auto off = zt::trainer::read_deepspeed_json(
      R"({"bf16": {"bf16_optimizer_states": false, "bf16_master_weights_and_grads": false}})",
      "ds.json", false, 2);
  CHECK(off.settings.empty());
  CHECK(has(refusal(R"({"bf16": {"bf16_moments": true}})"), "bf16.bf16_moments"));
}

TEST_CASE("JSON syntax errors give line and column, and batches must multiply out") {
  const std::string e = refusal(R"({
  "zero_optimization": {"stage": 2,}
})");
  CHECK(has(e, "ds.json:2:"));
  CHECK(has(e, "not valid JSON"));
  CHECK(has(refusal(R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4,
                        "gradient_accumulation_steps": 2})"),
            "train_batch_size: 30 != 4 x 2 x 2 ranks"));
  CHECK(has(refusal(R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4})"),
            "train_batch_size: 30 does not divide into whole micro steps"));
  // Given the batch and the accumulation, the micro batch is derived.
  const auto s = zt::trainer::read_deepspeed_json(
      R"({"train_batch_size": 24, "gradient_accumulation_steps": 3})", "ds.json", false, 2);
  REQUIRE(s.settings.size() == 3);
  CHECK(s.settings[0].key == "data.global_batch");  // the contract, enforced by the job
  CHECK(zt::value_to_toml(s.settings[0].value) == "24");
  CHECK(s.settings[1].key == "data.micro_batch");
  CHECK(zt::value_to_toml(s.settings[1].value) == "4");
  // A count below 1 is refused, not dropped.
  CHECK(has(refusal(R"({"gradient_accumulation_steps": -1})"),
            "gradient_accumulation_steps: -1 is not a count"));
  CHECK(has(refusal(R"({"train_batch_size": 0, "train_micro_batch_size_per_gpu": 2})"),
            "train_batch_size: 0 is not a count"));
}

TEST_CASE("integers that do not fit 64 bits are refused, not cast") {
  // A fuzz finding (tests/fuzz/corpus/deepspeed_json/float_past_int64.json): 3.3e109 written as
  // a whole number was cast to int64, which is undefined behaviour.
  CHECK(has(refusal(R"({"train_micro_batch_size_per_gpu": 3.3e109})"),
            "expected an integer, got number 3.3e+109"));
  CHECK(has(refusal(R"({"gradient_accumulation_steps": 18446744073709551615})"),
            "expected an integer of at most 9223372036854775807"));
  // A number past double's range is the parser's out_of_range, not a syntax error.
  CHECK(has(refusal(R"({"optimizer": {"params": {"weight_decay": 6e5555555555}}})"),
            "number overflow"));
}

TEST_CASE("a DeepSpeed config under a TOML: the TOML wins, --print-config names each origin") {
  const auto ds = zt::trainer::read_deepspeed_json(
      R"({"zero_optimization": {"stage": 2, "overlap_comm": false}, "gradient_clipping": 0.5})",
      "ds.json", false, 2);
  const zt::Config c = zt::trainer::load_config_string(
      "[run]\ntask = \"smoke\"\n[zero]\nstage = 3\n", "job.toml", {}, ds.settings);
  CHECK(c.section("zero").get_int("stage") == 3);
  CHECK(c.section("zero").get_bool("overlap_comm") == false);
  CHECK(c.section("zero").get_double("gradient_clipping") == 0.5);
  const std::string toml = c.to_toml();
  CHECK(has(toml, "overlap_comm = false  # from ds.json: zero_optimization.overlap_comm"));
  CHECK(has(toml, "gradient_clipping = 0.5  # from ds.json: gradient_clipping"));
  CHECK(has(toml, "stage = 3\n"));
}

TEST_CASE("a scheduler's \"auto\" params keep the zt config's lr, warmup and steps") {
  const std::string text = R"({
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-5}},
    "scheduler": {"type": "WarmupDecayLR",
                  "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                             "warmup_num_steps": "auto", "total_num_steps": "auto"}}})";
  const auto s = zt::trainer::read_deepspeed_json(text, "ds.json", false, 2);
  std::map<std::string, std::string> got;
  for (const auto& setting : s.settings) got[setting.key] = zt::value_to_toml(setting.value);
  // The optimizer's lr stays the peak (DeepSpeed's default 1e-3 took its place).
  CHECK(got["plugin.optim_hybrid_adam.lr"] == zt::value_to_toml(3e-5));
  CHECK(got["run.lr_schedule"] == "\"linear\"");
  CHECK(got.count("run.decay_steps") == 0);   // the zt config's (by default the run's steps)
  CHECK(got.count("run.warmup_steps") == 0);  // the zt config's, not 1000
  CHECK(got.count("run.warmup_min_ratio") == 0);
  // A start given without the peak cannot become zt's ratio of it: refused, saying so.
  const std::string refused = refusal(R"({
    "scheduler": {"type": "WarmupLR",
                  "params": {"warmup_min_lr": 1e-6, "warmup_max_lr": "auto"}}})");
  CHECK(has(refused, "scheduler.params.warmup_min_lr"));
  CHECK(has(refused, "run.warmup_min_ratio"));
}

TEST_CASE("fp16's counts are whole numbers and its scale power stays in fp32's range") {
  CHECK(has(refusal(R"({"fp16": {"enabled": true, "loss_scale_window": 2.5}})"),
            "fp16.loss_scale_window"));
  CHECK(has(refusal(R"({"fp16": {"enabled": true, "hysteresis": 1e30}})"), "fp16.hysteresis"));
  CHECK(has(refusal(R"({"fp16": {"enabled": true, "initial_scale_power": 2000}})"),
            "give a power from 0 to 127"));
  CHECK(refusal(R"({"fp16": {"enabled": true, "initial_scale_power": 32, "hysteresis": 2}})")
            .empty());
  // zt's scaler is DeepSpeed's default hysteresis; the consecutive kind is refused.
  CHECK(refusal(R"({"fp16": {"enabled": true, "consecutive_hysteresis": false}})").empty());
  CHECK(has(refusal(R"({"fp16": {"enabled": true, "consecutive_hysteresis": true}})"),
            "fp16.consecutive_hysteresis: true is not supported"));
}

TEST_CASE("DeepSpeed's train_batch_size holds when the zt config changes the micro batch") {
  // 32 = 4 x 2 x 4 ranks from the JSON; --set data.micro_batch=8 would make 64 a step.
  const auto s = zt::trainer::read_deepspeed_json(
      R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", "ds.json", false, 4);
  zt::trainer::DataSettings d;
  for (const auto& setting : s.settings) {
    if (setting.key == "data.global_batch") d.global_batch = std::get<int64_t>(setting.value);
    if (setting.key == "data.grad_accum") d.grad_accum = std::get<int64_t>(setting.value);
  }
  d.global_batch_where = "ds.json: train_batch_size";
  d.micro_batch = 4;
  CHECK_NOTHROW(d.check_global_batch(4));
  d.micro_batch = 8;
  CHECK_THROWS_WITH_AS(d.check_global_batch(4), doctest::Contains("data.global_batch = 32"),
                       zt::ConfigError);
}

TEST_CASE("a key given twice in one object is refused, naming it") {
  CHECK(has(refusal(R"({"zero_optimization": {"stage": 3}, "zero_optimization": {"stage": 1}})"),
            "\"zero_optimization\" is given twice in one object"));
  CHECK(has(refusal(R"({"zero_optimization": {"stage": 3, "stage": 1}})"),
            "\"stage\" is given twice"));
  // The same key in two objects is two settings.
  CHECK(refusal(R"({"fp16": {"enabled": false}, "bf16": {"enabled": false}})").empty());
}

TEST_CASE("DeepSpeed's MiCS and hpZ act at stage 3 only, and its mics_shard_size 0 is flat") {
  const auto read = [](const std::string& text) {
    const auto s = zt::trainer::read_deepspeed_json(text, "ds.json", false, 4);
    std::map<std::string, std::string> got;
    for (const auto& setting : s.settings) got[setting.key] = zt::value_to_toml(setting.value);
    return std::pair{got, s.warnings};
  };
  // 0 is MiCS off in DeepSpeed; in zt it is a host's ranks, so it maps to -1.
  CHECK(read(R"({"zero_optimization": {"stage": 3, "mics_shard_size": 0}})")
            .first["zero.mics_shard_size"] == "-1");
  CHECK(read(R"({"zero_optimization": {"stage": 3, "mics_shard_size": 2}})")
            .first["zero.mics_shard_size"] == "2");
  // A stage written 3.0 is stage 3 for them too, as for zero.stage.
  const auto [as_float, float_warnings] = read(
      R"({"zero_optimization": {"stage": 3.0, "mics_shard_size": 2}})");
  CHECK(as_float.at("zero.stage") == "3");
  CHECK(as_float.at("zero.mics_shard_size") == "2");
  CHECK(float_warnings.empty());
  // DeepSpeed's stage3_prefetch_bucket_size 0 prefetches nothing: zt's prefetch_units 0, not
  // prefetch_elements 0 (which counts units, one ahead by default).
  const auto [no_prefetch, ignored] = read(
      R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 0}})");
  CHECK(no_prefetch.at("zero.prefetch_units") == "0");
  CHECK(no_prefetch.count("zero.prefetch_elements") == 0);
  // Below stage 3 DeepSpeed ignores both: zt does too, and says so.
  for (const char* key : {"mics_shard_size", "zero_hpz_partition_size"}) {
    CAPTURE(key);
    const auto [got, warnings] = read(std::string(R"({"zero_optimization": {"stage": 2, ")") + key +
                                      R"(": 2}})");
    CHECK(got.count("zero.mics_shard_size") == 0);
    REQUIRE(warnings.size() == 1);
    CHECK(has(warnings[0], std::string("zero_optimization.") + key +
                               " = 2 is ignored, as DeepSpeed ignores it below stage 3 "
                               "(zero_optimization.stage is 2)"));
  }
}

TEST_CASE("DeepSpeed refusals: a scheduler's unknown key, a negative loss scale; the lenient "
          "hint only where lenient mode helps") {
  const std::string misspelt = refusal(
      R"({"scheduler": {"type": "WarmupLR", "parms": {"warmup_max_lr": 3e-4}}})");
  CHECK(has(misspelt, "ds.json: scheduler.parms is not supported by zt"));
  CHECK(has(misspelt, "--deepspeed-lenient"));
  const std::string negative = refusal(R"({"fp16": {"enabled": true, "loss_scale": -128}})");
  CHECK(has(negative, "ds.json: fp16.loss_scale: -128 is no loss scale"));
  CHECK_FALSE(has(negative, "--deepspeed-lenient"));
  CHECK_FALSE(has(refusal(R"({"gradient_clipping": "1.0"})"), "--deepspeed-lenient"));
}

TEST_CASE("a DeepSpeed config under a printed config: its values replace what the printed file "
          "marks as defaults, and the file's other name of a key wins") {
  const auto ds = zt::trainer::read_deepspeed_json(
      R"({"zero_optimization": {"stage": 3, "mics_shard_size": -1}})", "ds.json", false, 2);
  // `stage = 0  # default` as --print-config writes it: not set by the file.
  const zt::Config printed = zt::trainer::load_config_string(
      "[run]\ntask = \"smoke\"\n[zero]\nstage = 0  # default\n", "full.toml", {}, ds.settings);
  CHECK(printed.section("zero").get_int("stage") == 3);
  // Edited to another value, the line is set like any other, though it still says "# default".
  const zt::Config edited = zt::trainer::load_config_string(
      "[run]\ntask = \"smoke\"\n[zero]\nstage = 2  # default\n", "full.toml", {}, ds.settings);
  CHECK(edited.section("zero").get_int("stage") == 2);
  // The file's shard_group_size (mics_shard_size's other name) wins over the JSON's -1: the two
  // set apart were a contradiction the job refused.
  const zt::Config renamed = zt::trainer::load_config_string(
      "[run]\ntask = \"smoke\"\n[zero]\nshard_group_size = 2\n", "job.toml", {}, ds.settings);
  CHECK(renamed.section("zero").get_int("shard_group_size") == 2);
  CHECK_FALSE(renamed.section("zero").is_set("mics_shard_size"));
}

TEST_CASE("--set turns off a codec a DeepSpeed config chose, with the options it wrote for it") {
  const auto ds = zt::trainer::read_deepspeed_json(
      R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": true}})", "ds.json", false,
      2);
  const zt::Config c = zt::trainer::load_config_string("[run]\ntask = \"smoke\"\n", "job.toml",
                                                       {"plugins.codec_weights=\"\""}, ds.settings);
  CHECK(c.section("plugins").get_string("codec_weights").empty());
  // A table the file wrote itself is still refused without its codec.
  CHECK_THROWS_WITH_AS(
      zt::trainer::load_config_string("[run]\ntask = \"smoke\"\n[codec.weights]\nbits = 8\n",
                                      "job.toml", {"plugins.codec_weights=\"\""}, ds.settings),
      doctest::Contains("[codec.weights] configures the weights codec"), zt::ConfigError);
}

TEST_CASE("a folder given as the DeepSpeed config is refused by name") {
  // It opened as a stream that reads nothing: "not valid JSON (empty input)" at line 1 of it.
  CHECK_THROWS_WITH_AS(zt::trainer::read_deepspeed_config(kDir, false, 2),
                       doctest::Contains("(run.deepspeed / --deepspeed) is a folder; give its "
                                         "JSON file"),
                       zt::ConfigError);
}

TEST_CASE("a TOML or --set value over a DeepSpeed one is said, and a JSON key whose stage or "
          "precision the config moved is refused") {
  // ZeRO++ and hpZ act at DeepSpeed's stage 3 only, bf16 states with bf16 training: under a
  // TOML at stage 2 (or fp32, "auto"'s answer here) they trained int4 gradients in MiCS groups
  // at stage 2, and Adam's moments in bf16 in an fp32 job, without a word.
  const auto ds = zt::trainer::read_deepspeed_json(
      R"({"zero_optimization": {"stage": 3, "zero_quantized_gradients": true,
                                "zero_hpz_partition_size": 2},
          "bf16": {"enabled": "auto", "bf16_optimizer_states": true},
          "gradient_clipping": 0.5})",
      "ds.json", false, 4);
  const zt::Config stage2 = zt::trainer::load_config_string(
      "[run]\ntask = \"smoke\"\n[zero]\nstage = 2\n", "job.toml", {}, ds.settings);
  std::string refused;
  try {
    zt::trainer::check_deepspeed_conditions(stage2, ds);
  } catch (const zt::ConfigError& e) {
    refused = e.what();
  }
  CHECK(has(refused, "ds.json: zero_optimization.zero_quantized_gradients applies only at stage "
                     "3 (DeepSpeed ignores it below), and the job has zero.stage = 2 "
                     "(job.toml:4:9): set zero.stage = 3 there, or remove the key from the JSON"));
  CHECK(has(refused, "ds.json: zero_optimization.zero_hpz_partition_size applies only at stage 3"));
  CHECK(has(refused, "ds.json: bf16.bf16_optimizer_states keeps optimizer state in bf16 for bf16 "
                     "training (DeepSpeed's bf16 section), and the job has precision.compute = "
                     "\"fp32\" (default)"));
  // The stage the JSON said, and bf16 compute: nothing to refuse, nothing replaced.
  const zt::Config agreed = zt::trainer::load_config_string(
      "[run]\ntask = \"smoke\"\n[zero]\nstage = 3\n", "job.toml", {"precision.compute=\"bf16\""},
      ds.settings);
  CHECK_NOTHROW(zt::trainer::check_deepspeed_conditions(agreed, ds));
  CHECK(zt::trainer::replaced_deepspeed_settings(agreed, ds).empty());
  // The file's clipping and --set's state dtype over the JSON's: said, one line each; the
  // JSON's bf16 states are no longer in force, so fp32 compute is no contradiction.
  const zt::Config replaced = zt::trainer::load_config_string(
      "[run]\ntask = \"smoke\"\n[zero]\nstage = 3\ngradient_clipping = 1.0\n", "job.toml",
      {"plugin.optim_hybrid_adam.state_dtype=\"fp32\""}, ds.settings);
  CHECK_NOTHROW(zt::trainer::check_deepspeed_conditions(replaced, ds));
  const std::vector<std::string> lines = zt::trainer::replaced_deepspeed_settings(replaced, ds);
  REQUIRE(lines.size() == 2);
  CHECK(has(lines[0], "plugin.optim_hybrid_adam.state_dtype = \"fp32\" (--set"));
  CHECK(has(lines[0], "over \"bf16\" from ds.json: bf16.bf16_optimizer_states"));
  CHECK(lines[1] == "zero.gradient_clipping = 1.0 (job.toml:5:21) over 0.5 from ds.json: "
                    "gradient_clipping: the TOML and --set win over the JSON");
}
