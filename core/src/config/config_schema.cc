// The schema of the core's config sections: user-facing names follow DeepSpeed / FSDP where a
// concept exists there (stage, reduce_bucket_mb, prefetch, param_persistence_threshold, ...); the
// rules across their keys, one named function each; and what a program adds to both (the
// trainer's sections are the trainer's: trainer/settings/trainer_config.cc).
#include <algorithm>
#include <limits>

#include "zt/error.h"
#include "zt/host/config.h"
#include "zt/plugin.h"

namespace zt {

namespace {

constexpr double kMaxPort = 65535;

SectionSpec run_section() {
  return {
      "run",
      "what to run and where results go",
      {opt_string("name", "zt-run", "name of the run, in its trace's metadata (otherData.run)"),
       opt_string("task", "train",
                  "'train' the model, or 'smoke': load every plugin and check "
                  "real collectives across the ranks",
                  {"train", "smoke"}),
       opt_int("steps", 10, "optimizer steps to run", 1),
       opt_int("seed", 1234, "seed for model init and data; identical on every rank", 0),
       opt_string("out_dir", "runs/zt-run", "folder for metrics.jsonl, summary and checkpoints"),
       opt_int("log_every", 1, "print a progress line every N steps (metrics.jsonl has every step)",
               1),
       opt_string("deepspeed", "",
                  "a DeepSpeed JSON config whose keys set zt's (this file and --set win); "
                  "see docs/deepspeed.md"),
       opt_bool("deepspeed_lenient", false,
                "keys of the DeepSpeed config zt does not support are warnings, not errors")}};
}

SectionSpec launch_section() {
  return {"launch",
          "processes, rendezvous and timeouts",
          {opt_int("nproc", 1,
                   "local ranks to spawn when no torchrun/mpirun/srun environment is "
                   "present",
                   1, 1024),
           opt_string("device", "cpu",
                      "cuda: the offload tiers pin their host memory for a GPU (the engine "
                      "computes on the CPU)",
                      {"cpu", "cuda"}),
           opt_int("max_restarts", 0,
                   "zt's launcher: when a rank dies, start every rank again, at most this "
                   "many times: from the job's newest checkpoint once it saved one, else as "
                   "the job started",
                   0, 1000),
           opt_string("master_addr", "127.0.0.1",
                      "address of rank 0's rendezvous store "
                      "(MASTER_ADDR overrides)"),
           opt_int("master_port", 0,
                   "port of rank 0's rendezvous store; 0 picks a free port for "
                   "local launches (MASTER_PORT overrides)",
                   0, kMaxPort),
           opt_double("timeout_s", 120, "bound on every wait: rendezvous, collectives, peers", 0.1,
                      86400),
           opt_bool("check_collectives", false,
                    "debug: before every collective the ranks compare its op, size, dtype and "
                    "issuing phase, and stop at the first that differs (naming both sides) "
                    "instead of hanging; costs one small all_gather per collective"),
           opt_int("flight_records", 4096,
                   "collectives each rank keeps for <out_dir>/flight/rank-N.json (written on a "
                   "failure, a hang or SIGUSR2)",
                   16, 10000000),
           opt_double("memory_limit_gb", 0,
                      "host memory the ranks of this host may use, as the memory-fit check "
                      "counts it (process, model states, buffers, activations); 0 = what the OS "
                      "reports available (MemAvailable), or the room left under the memory "
                      "cgroup's limit when that is less",
                      0, 1 << 24)}};
}

SectionSpec precision_section() {
  return {
      "precision",
      "compute dtype and the dynamic loss scaler (fp16)",
      {opt_string("compute", "fp32", "dtype of forward/backward", {"fp32", "bf16", "fp16"}),
       opt_double("initial_scale", 4294967296.0, "first loss scale (fp16)", 1),
       opt_double("min_scale", 1, "the scale never drops below this (> 0)", 0),
       opt_double("max_scale", 4294967296.0, "the scale never grows above this", 1),
       opt_double("growth_factor", 2, "scale *= this after growth_interval clean steps", 1),
       opt_double("backoff_factor", 0.5, "scale *= this on overflow (between 0 and 1)", 0, 1),
       opt_int("growth_interval", 1000, "clean steps before the scale grows", 1),
       opt_int(
           "hysteresis", 2,
           "overflows tolerated before the scale backs off (refilled when it grows, as DeepSpeed)",
           1)}};
}

SectionSpec zero_section() {
  return {
      "zero",
      "ZeRO stage and its knobs",
      {opt_int("stage", 0,
               "0: plain data parallel, 1: shard optimizer states, 2: + gradients, "
               "3: + parameters",
               0, 3),
       // At most 1 TiB: bytes are counted in int64 (1e13 MiB overflowed it).
       opt_double("reduce_bucket_mb", 25, "gradient reduce(-scatter) bucket size, MiB", 0.001,
                  1 << 20),
       opt_double("allgather_bucket_mb", 25, "parameter all-gather bucket size, MiB", 0.001,
                  1 << 20),
       opt_bool("overlap_comm", true, "overlap gradient reduction with backward compute"),
       opt_int("prefetch_units", 1, "stage 3: units gathered ahead of the one running", 0),
       opt_int("prefetch_elements", 0, "stage 3: prefetch by element count instead (0 = off)", 0),
       opt_int("param_persistence_threshold", 100000,
               "stage 3: groups whose largest tensor has fewer elements stay gathered", 0),
       opt_int("max_live_parameters", 1000000000, "stage 3: bound on gathered elements alive", 1),
       opt_double("gradient_predivide_factor", 1,
                  "divide gradients by this before the "
                  "reduction and by world/this after (fp16 range)",
                  1),
       opt_double("gradient_clipping", 0,
                  "clip gradients to this global norm (over all "
                  "shards); 0 = off",
                  0),
       opt_string_list("no_weight_decay", {},
                       "parameters the optimizer's weight decay leaves alone: shell globs over "
                       "the names (`*` crosses dots), e.g. [\"*.bias\", \"*ln*\"] for GPT "
                       "biases and LayerNorm gains; a pattern that matches none is warned of"),
       opt_double("offload_optimizer_fraction", 1,
                  "share of the optimizer states and fp32 "
                  "master weights placed in plugins.offload_optimizer (groups in model order); "
                  "the rest stays in compute memory",
                  0, 1),
       opt_double("offload_param_fraction", 1,
                  "stage 3: share of the parameter shards placed "
                  "in plugins.offload_param (groups in model order)",
                  0, 1),
       opt_int("sub_group_size", 1000000000,
               "elements per tile when the step streams "
               "offloaded states through host buffers: smaller tiles, less staging memory",
               1),
       opt_bool("pipeline_read", true, "read the next tile while this one is updated"),
       opt_bool("pipeline_write", true, "write the last tile back while this one is updated"),
       opt_bool("gradients_in_tier", false,
                "with gradient clipping or loss scaling, where a group whose optimizer states "
                "stream from a file tier keeps its reduced gradient until the step knows the "
                "global norm: false = host memory (4 bytes per parameter of the rank's share; "
                "no disk traffic for it), true = the tier (host memory flat; 8 more bytes per "
                "parameter through the disk each step)"),
       opt_int("mics_shard_size", -1,
               "MiCS / hpZ (stages 1-3): shard model states over groups of this many "
               "consecutive ranks, replicated across the groups, so parameter gathers stay "
               "in a group and only gradient shards cross groups; -1 = every rank (flat "
               "ZeRO), 0 = the ranks of one host; must divide the world size",
               -1),
       opt_int("shard_group_size", -1, "another name for mics_shard_size", -1),
       opt_bool("mics_hierarchical_params_gather", false,
                "groups spanning hosts gather parameters in two levels: across hosts among "
                "the ranks at the same place, then within each host"),
       opt_string("codec_scope", "all",
                  "where the codecs of plugins.codec_* apply: \"all\" collectives, or only "
                  "\"across_hosts\": a shard group on one host then moves exact bytes "
                  "(shared memory is fast; the codec's cost and error buy nothing there)",
                  {"all", "across_hosts"}),
       opt_bool("codec_error_feedback", false,
                "with plugins.codec_gradients: keep what encoding a rank's gradients lost and "
                "add it before the next encode (LoCo-style error feedback; fp32, one flat "
                "gradient per rank; saved in checkpoints)")}};
}

SectionSpec plugins_section() {
  return {
      "plugins",
      "which plugin supplies each part",
      {opt_string_list("dirs", {},
                       "extra plugin folders, searched before ZT_PLUGIN_PATH and "
                       "the built-in folder"),
       opt_string("comm", "comm_ucx", "communication plugin"),
       opt_string("shard", "", "shard strategy plugin (stages 1-3)"),
       opt_string("optimizer", "", "optimizer plugin"),
       opt_string("offload_optimizer", "", "tier for optimizer states (stages 1-3); '' for none"),
       opt_string("offload_param", "", "tier for parameter shards (stage 3); '' for none"),
       opt_string("model", "", "model plugin, with model.kind = \"plugin\"; '' for none"),
       opt_string("codec_weights", "",
                  "codec of stage 3's parameter all-gather (ZeRO++ qwZ, e.g. \"codec_blockq\" "
                  "with [codec.weights] bits = 8); '' for none"),
       opt_string("codec_gradients", "",
                  "codec of the gradient reduce-scatter, sent all-to-all (ZeRO++ qgZ, e.g. "
                  "\"codec_blockq\" with [codec.gradients] bits = 4; stages 1-3); '' for none")}};
}

// The core's rules across keys (config_rules()), one function each.

void offload_param_needs_stage_3(const Config& config, ConfigBreaks& broken) {
  const Options& zero = config.section("zero");
  const Options& plugins = config.section("plugins");
  const int64_t stage = zero.get_int("stage");
  if (plugins.get_string("offload_param").empty() || stage == 3) return;
  broken.push_back(key_at(plugins, "offload_param") + ": plugins.offload_param = \"" +
                   plugins.get_string("offload_param") + "\" needs zero.stage = 3 (stage is " +
                   std::to_string(stage) + " at " + key_at(zero, "stage") +
                   "); parameters are only sharded, so only offloadable, in stage 3");
}

void offload_optimizer_needs_stage_1(const Config& config, ConfigBreaks& broken) {
  const Options& zero = config.section("zero");
  const Options& plugins = config.section("plugins");
  if (plugins.get_string("offload_optimizer").empty() || zero.get_int("stage") >= 1) return;
  broken.push_back(key_at(plugins, "offload_optimizer") +
                   ": plugins.offload_optimizer needs zero.stage >= 1 (stage is 0 at " +
                   key_at(zero, "stage") + ")");
}

void shard_groups_need_stage_1(const Config& config, ConfigBreaks& broken) {
  const Options& zero = config.section("zero");
  for (const char* key : {"mics_shard_size", "shard_group_size"}) {
    if (zero.get_int(key) < 0 || zero.get_int("stage") >= 1) continue;
    broken.push_back(key_at(zero, key) + ": zero." + key + " = " +
                     std::to_string(zero.get_int(key)) + " needs zero.stage >= 1 (stage is 0 at " +
                     key_at(zero, "stage") +
                     "); stage 0 shards nothing, so there is no group to shard over");
  }
}

void shard_group_names_agree(const Config& config, ConfigBreaks& broken) {
  const Options& zero = config.section("zero");
  if (!zero.is_set("mics_shard_size") || !zero.is_set("shard_group_size") ||
      zero.get_int("mics_shard_size") == zero.get_int("shard_group_size")) {
    return;
  }
  broken.push_back(
      key_at(zero, "shard_group_size") +
      ": zero.shard_group_size = " + std::to_string(zero.get_int("shard_group_size")) +
      " contradicts zero.mics_shard_size = " + std::to_string(zero.get_int("mics_shard_size")) +
      " at " + key_at(zero, "mics_shard_size") + "; they name one setting, keep one of them");
}

// The loss scaler's bounds: a scale of 0 made every gradient 0/0 (every step skipped for good,
// and its checkpoint refused as damaged); a backoff of 1 never backs off; a first scale outside
// [min_scale, max_scale] contradicts them.
void loss_scaler_bounds_agree(const Config& config, ConfigBreaks& broken) {
  const Options& p = config.section("precision");
  const double min = p.get_double("min_scale"), max = p.get_double("max_scale"),
               first = p.get_double("initial_scale"), backoff = p.get_double("backoff_factor");
  if (!(min > 0)) {
    broken.push_back(key_at(p, "min_scale") + ": precision.min_scale = " + std::to_string(min) +
                     " must be > 0 (a scale of 0 zeroes every gradient); e.g. 1");
  }
  if (!(backoff > 0 && backoff < 1)) {
    broken.push_back(key_at(p, "backoff_factor") +
                     ": precision.backoff_factor = " + std::to_string(backoff) +
                     " must be between 0 and 1, both excluded (the scale shrinks by it on an "
                     "overflow); e.g. 0.5");
  }
  if (min > max) {
    broken.push_back(key_at(p, "min_scale") + ": precision.min_scale = " + std::to_string(min) +
                     " is above precision.max_scale = " + std::to_string(max) + " at " +
                     key_at(p, "max_scale"));
  } else if (first < min || first > max) {
    broken.push_back(key_at(p, "initial_scale") +
                     ": precision.initial_scale = " + std::to_string(first) +
                     " is outside [min_scale, max_scale] = [" + std::to_string(min) + ", " +
                     std::to_string(max) + "] (" + key_at(p, "min_scale") + ", " +
                     key_at(p, "max_scale") + "); move one of them");
  }
}

void training_needs_its_plugins(const Config& config, ConfigBreaks& broken) {
  const Options& plugins = config.section("plugins");
  const int64_t stage = config.section("zero").get_int("stage");
  if (config.section("run").get_string("task") != "train") return;
  if (plugins.get_string("optimizer").empty()) {
    broken.push_back(key_at(plugins, "optimizer") +
                     ": run.task = \"train\" needs plugins.optimizer (e.g. \"optim_hybrid_adam\")");
  }
  if (stage >= 1 && plugins.get_string("shard").empty()) {
    broken.push_back(key_at(plugins, "shard") + ": zero.stage = " + std::to_string(stage) +
                     " needs plugins.shard (\"shard_tensor\" or \"shard_bucket\")");
  }
}

void codecs_need_their_stage(const Config& config, ConfigBreaks& broken) {
  const Options& zero = config.section("zero");
  const Options& plugins = config.section("plugins");
  const int64_t stage = zero.get_int("stage");
  if (!plugins.get_string("codec_weights").empty() && stage != 3) {
    broken.push_back(key_at(plugins, "codec_weights") +
                     ": plugins.codec_weights needs zero.stage = 3 " + "(stage is " +
                     std::to_string(stage) + " at " + key_at(zero, "stage") +
                     "): only stage 3 gathers parameters to compute with; remove it or raise "
                     "the stage");
  }
  if (!plugins.get_string("codec_gradients").empty() && stage < 1) {
    broken.push_back(key_at(plugins, "codec_gradients") +
                     ": plugins.codec_gradients needs zero.stage >= 1 (stage is 0 at " +
                     key_at(zero, "stage") +
                     "): stage 0 all-reduces gradients, which a codec does "
                     "not carry");
  }
  if (zero.get_bool("codec_error_feedback") && plugins.get_string("codec_gradients").empty()) {
    broken.push_back(key_at(zero, "codec_error_feedback") +
                     ": zero.codec_error_feedback needs plugins.codec_gradients (the error it "
                     "feeds back is the gradient codec's)");
  }
}

// LibTorch has no fp16 matrix kernels on the CPU, and the engine computes there whatever
// launch.device says (today it pins the offload tiers' host memory only): an fp16 job would fail
// in its first matmul with ATen's words, or train on the CPU in a dtype it was not meant for.
void fp16_needs_gpu_engine(const Config& config, ConfigBreaks& broken) {
  const Options& precision = config.section("precision");
  if (precision.get_string("compute") != "fp16") return;
  broken.push_back(key_at(precision, "compute") +
                   ": precision.compute = \"fp16\" needs the engine on a GPU, and this release's "
                   "engine computes on the CPU (launch.device = \"cuda\" pins the offload tiers' "
                   "host memory only), where LibTorch has no fp16 matrix kernels; use \"bf16\"");
}

// The core's sections and rules, and what programs added (add_config_sections).
std::vector<SectionSpec>& schema() {
  static std::vector<SectionSpec> sections = {run_section(), launch_section(), precision_section(),
                                              zero_section(), plugins_section()};
  return sections;
}

std::vector<ConfigRule>& rules() {
  static std::vector<ConfigRule> list = {
      {"offload_param needs stage 3", offload_param_needs_stage_3},
      {"offload_optimizer needs stage 1", offload_optimizer_needs_stage_1},
      {"shard groups need stage 1", shard_groups_need_stage_1},
      {"mics_shard_size and shard_group_size agree", shard_group_names_agree},
      {"training needs an optimizer, and a shard strategy from stage 1",
       training_needs_its_plugins},
      {"fp16 needs a GPU engine", fp16_needs_gpu_engine},
      {"the loss scaler's bounds agree", loss_scaler_bounds_agree},
      {"codecs need their stage", codecs_need_their_stage}};
  return list;
}

}  // namespace

const std::vector<ConfigRule>& config_rules() { return rules(); }

std::string key_at(const Options& section, const std::string& key) {
  return section.where(key).str();
}

const std::vector<SectionSpec>& config_schema() { return schema(); }

const OptionSpec* config_option(const std::string& section, const std::string& key) {
  for (const SectionSpec& s : schema()) {
    if (s.name != section) continue;
    for (const OptionSpec& spec : s.keys)
      if (spec.name == key) return &spec;
  }
  return nullptr;
}

void add_config_sections(std::vector<SectionSpec> sections, std::vector<ConfigRule> more_rules) {
  for (SectionSpec& added : sections) {
    auto same = std::find_if(schema().begin(), schema().end(),
                             [&](const SectionSpec& s) { return s.name == added.name; });
    if (same == schema().end()) {
      schema().push_back(std::move(added));
      continue;
    }
    for (OptionSpec& key : added.keys) {
      for (const OptionSpec& have : same->keys) {
        if (have.name == key.name) {
          throw InternalError("add_config_sections: [" + added.name + "] already has a key '" +
                              key.name + "'");
        }
      }
      same->keys.push_back(std::move(key));
    }
  }
  for (ConfigRule& rule : more_rules) rules().push_back(std::move(rule));
}

const std::vector<PluginRole>& plugin_roles() {
  static const std::vector<PluginRole> roles = {{"comm", ZT_KIND_COMM},
                                                {"shard", ZT_KIND_SHARD},
                                                {"optimizer", ZT_KIND_OPTIMIZER},
                                                {"offload_optimizer", ZT_KIND_OFFLOAD},
                                                {"offload_param", ZT_KIND_OFFLOAD},
                                                {"model", ZT_KIND_MODEL},
                                                {"codec_weights", ZT_KIND_CODEC},
                                                {"codec_gradients", ZT_KIND_CODEC}};
  return roles;
}

}  // namespace zt
