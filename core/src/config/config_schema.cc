// The schema of every core config section: user-facing names follow DeepSpeed / FSDP where a
// concept exists there (stage, reduce_bucket_mb, prefetch, param_persistence_threshold, ...).
#include <limits>

#include "zt/config.h"
#include "zt/plugin.h"

namespace zt {

namespace {

constexpr double kMaxPort = 65535;

SectionSpec run_section() {
  return {
      "run",
      "what to run and where results go",
      {opt_string("name", "zt-run", "name of the run, used in reports"),
       opt_string("task", "train",
                  "'train' the model, or 'smoke': load every plugin and check "
                  "real collectives across the ranks",
                  {"train", "smoke"}),
       opt_int("steps", 10, "optimizer steps to run", 1),
       opt_int("seed", 1234, "seed for model init and data; identical on every rank", 0),
       opt_string("out_dir", "runs/zt-run", "folder for metrics.jsonl, summary and checkpoints"),
       opt_int("log_every", 1, "print and record metrics every N steps", 1),
       opt_string("lr_schedule", "constant",
                  "learning-rate schedule after the warm-up: constant, cosine decay or "
                  "linear decay to min_lr_ratio * lr",
                  {"constant", "cosine", "linear"}),
       opt_int("warmup_steps", 0, "steps of warm-up from warmup_min_ratio * lr to lr", 0),
       opt_string("warmup_type", "linear", "warm-up curve: linear, or log (fast first)",
                  {"linear", "log"}),
       opt_double("warmup_min_ratio", 0, "the warm-up's first lr as a fraction of lr", 0, 1),
       opt_double("min_lr_ratio", 0.1, "cosine/linear: final lr as a fraction of lr", 0, 1),
       opt_int("decay_steps", 0, "cosine/linear: steps until the final lr (0 = run.steps)", 0),
       opt_string("deepspeed", "",
                  "a DeepSpeed JSON config whose keys set zt's (this file and --set win); "
                  "see README, Coming from DeepSpeed"),
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
           opt_string("device", "cpu", "where compute runs", {"cpu", "cuda"}),
           opt_int("max_restarts", 0,
                   "zt's launcher: when a rank dies, start every rank again with --resume "
                   "auto (from the newest checkpoint), at most this many times",
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
           opt_double("memory_limit_gb", 0,
                      "host memory the ranks of this host may use, as the memory-fit check "
                      "counts it (process, model states, buffers, activations); 0 = what the OS "
                      "reports available (MemAvailable)",
                      0)}};
}

SectionSpec model_section() {
  return {
      "model",
      "the model to train",
      {opt_string("kind", "gpt",
                  "model family: built in (gpt, mlp), a TorchScript file saved from PyTorch "
                  "(torchscript: model.path), or a model plugin (plugin: plugins.model)",
                  {"gpt", "mlp", "torchscript", "plugin"}),
       opt_string("path", "", "torchscript: the file torch.jit.script(m).save() wrote"),
       opt_string_list("units", {},
                       "torchscript: the modules run as units, in call order ('blocks.*' = one "
                       "unit per element of a ModuleList/Sequential); [] = the top-level "
                       "children in order, containers expanded"),
       opt_string("loss", "auto",
                  "torchscript: 'method' calls the module's loss(output, target); "
                  "'cross_entropy' (logits [..., C] vs class ids) or 'mse'; 'auto' = the "
                  "module's loss method when it has one",
                  {"auto", "method", "cross_entropy", "mse"}),
       opt_double_list("input_shape", {},
                       "torchscript on vectors: one sample's input shape (e.g. [3, 16, 16]); "
                       "[] = the model takes token ids [B, seq_len] (model.seq_len, model.vocab)"),
       opt_double_list("target_shape", {},
                       "torchscript on vectors: one sample's target shape (e.g. [10])"),
       opt_string("preset", "tiny", "GPT size preset; explicit sizes below override it",
                  {"tiny", "gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "custom"}),
       opt_int("n_layer", 0, "GPT blocks (0 = from preset)", 0),
       opt_int("n_head", 0, "GPT attention heads (0 = from preset)", 0),
       opt_int("d_model", 0, "GPT width (0 = from preset)", 0),
       opt_int("seq_len", 0, "GPT context length (0 = from preset)", 0),
       opt_int("vocab", 0, "GPT vocabulary (0 = from preset; 256 for byte-level text)", 0),
       opt_bool("activation_checkpointing", false,
                "recompute each unit's activations in "
                "backward: less memory, about one more forward"),
       opt_string("init_from", "",
                  "a safetensors file to start from instead of the seeded init (fine-tuning): "
                  "GPT tensors under Hugging Face GPT-2 names, as `trainer export` writes them"),
       opt_int("width", 1024, "MLP layer width", 1),
       opt_int("depth", 8, "MLP layers, each its own unit", 1),
       opt_string("activation", "relu", "MLP activation", {"none", "relu", "gelu"})}};
}

SectionSpec data_section() {
  return {
      "data",
      "the training data",
      {opt_string("kind", "synthetic", "data source", {"synthetic", "text", "tokens"}),
       opt_string("path", "", "file for kind 'text' (any bytes) or 'tokens' (flat binary)"),
       opt_string("token_dtype", "uint16", "element type of a 'tokens' file", {"uint16", "uint32"}),
       opt_int("micro_batch", 4, "samples per rank per micro step", 1),
       opt_int("grad_accum", 1, "micro steps accumulated per optimizer step", 1),
       opt_int("global_batch", 0,
               "samples per optimizer step over all ranks; must equal "
               "micro_batch * grad_accum * world (0 = that product)",
               0)}};
}

SectionSpec precision_section() {
  return {"precision",
          "compute dtype and the dynamic loss scaler (fp16)",
          {opt_string("compute", "fp32", "dtype of forward/backward", {"fp32", "bf16", "fp16"}),
           opt_double("initial_scale", 4294967296.0, "first loss scale (fp16)", 1),
           opt_double("min_scale", 1, "the scale never drops below this", 0),
           opt_double("max_scale", 4294967296.0, "the scale never grows above this", 1),
           opt_double("growth_factor", 2, "scale *= this after growth_interval clean steps", 1),
           opt_double("backoff_factor", 0.5, "scale *= this on overflow", 0, 1),
           opt_int("growth_interval", 1000, "clean steps before the scale grows", 1),
           opt_int("hysteresis", 2, "overflows tolerated before the scale backs off", 1)}};
}

SectionSpec zero_section() {
  return {
      "zero",
      "ZeRO stage and its knobs",
      {opt_int("stage", 0,
               "0: plain data parallel, 1: shard optimizer states, 2: + gradients, "
               "3: + parameters",
               0, 3),
       opt_double("reduce_bucket_mb", 25, "gradient reduce(-scatter) bucket size, MiB", 0.001),
       opt_double("allgather_bucket_mb", 25, "parameter all-gather bucket size, MiB", 0.001),
       opt_bool("overlap_comm", true, "overlap gradient reduction with backward compute"),
       opt_int("prefetch_units", 1, "stage 3: units gathered ahead of the one running", 0),
       opt_int("prefetch_elements", 0, "stage 3: prefetch by element count instead (0 = off)", 0),
       opt_int("param_persistence_threshold", 100000,
               "stage 3: tensors with fewer elements "
               "stay gathered",
               0),
       opt_int("max_live_parameters", 1000000000, "stage 3: bound on gathered elements alive", 1),
       opt_double("gradient_predivide_factor", 1,
                  "divide gradients by this before the "
                  "reduction and by world/this after (fp16 range)",
                  1),
       opt_double("gradient_clipping", 0,
                  "clip gradients to this global norm (over all "
                  "shards); 0 = off",
                  0),
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
       opt_int("mics_shard_size", -1,
               "MiCS / hpZ (stages 1-3): shard model states over groups of this many "
               "consecutive ranks, replicated across the groups, so parameter gathers stay "
               "in a group and only gradient shards cross groups; -1 = every rank (flat "
               "ZeRO), 0 = the ranks of one host; must divide the world size",
               -1),
       opt_int("shard_group_size", -1, "another name for mics_shard_size", -1),
       opt_bool("mics_hierarchical_params_gather", false,
                "groups spanning hosts gather parameters in two levels: across hosts among "
                "the ranks at the same place, then within each host")}};
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
       opt_string("model", "", "model plugin, with model.kind = \"plugin\"; '' for none")}};
}

SectionSpec checkpoint_section() {
  return {
      "checkpoint",
      "sharded checkpoints: when to save, where, how many to keep, and resuming",
      {opt_int("every_steps", 0, "save every N optimizer steps and after the last; 0 = never", 0),
       opt_double("min_interval_s", 0,
                  "a stop signal (SIGTERM, SIGINT, SIGUSR1) saves unless the newest checkpoint "
                  "is younger than this",
                  0),
       opt_string("dir", "", "folder of the checkpoints ('' = <run.out_dir>/checkpoints)"),
       opt_int("keep_last", 2, "complete checkpoints kept; older ones are removed (0 = all)", 0),
       opt_bool("async", true,
                "the step waits only for a copy of the bytes in memory; the files are "
                "written while training goes on"),
       opt_string("resume", "",
                  "'' = start fresh, 'auto' = from the newest checkpoint in dir (fresh if "
                  "none), or a checkpoint folder (trainer --resume sets it)"),
       opt_double("timeout_s", 600,
                  "bound on a save's waits: the previous save, the other ranks' files", 1,
                  604800)}};
}

SectionSpec ab_section() {
  return {
      "ab",
      "live A/B inside one training job: the arms alternate every switch_every steps",
      {opt_string_list("arms", {},
                       "each arm's overrides, comma-separated as trainer ab's --a/--b "
                       "(e.g. \"plugins.shard=shard_tensor\"); two or more switch the job "
                       "between them, resharding its state at a step boundary"),
       opt_int("switch_every", 10, "optimizer steps an arm trains before the next takes over", 1),
       opt_string("switch_dir", "",
                  "folder the state passes through at a switch ('' = "
                  "<run.out_dir>/ab-switch); removed at the end")}};
}

}  // namespace

const std::vector<SectionSpec>& config_schema() {
  static const std::vector<SectionSpec> schema = {
      run_section(),  launch_section(),  model_section(),      data_section(), precision_section(),
      zero_section(), plugins_section(), checkpoint_section(), ab_section()};
  return schema;
}

const std::vector<PluginRole>& plugin_roles() {
  static const std::vector<PluginRole> roles = {{"comm", ZT_KIND_COMM},
                                                {"shard", ZT_KIND_SHARD},
                                                {"optimizer", ZT_KIND_OPTIMIZER},
                                                {"offload_optimizer", ZT_KIND_OFFLOAD},
                                                {"offload_param", ZT_KIND_OFFLOAD},
                                                {"model", ZT_KIND_MODEL}};
  return roles;
}

}  // namespace zt
