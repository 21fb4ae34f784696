// A job's settings, typed and resolved once from its config at the door (the trainer's run_job,
// each live-A/B arm, each tune trial, the Python package): every default and every derived
// value (the checkpoint folder, the A/B switch folder, the global batch) is computed here and
// nowhere else, and the rest of the trainer takes these values, never the config. The engine's
// sections ([zero], [precision], [plugins], [launch]) are read by the core, next to the schema
// that declares them (zt/host/engine_settings.h); the trainer's own here.
// Thread safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "zt/host/engine_settings.h"

namespace zt {
class Config;  // the door's: only settings/, tune/ and app/ include zt/host/config.h
}  // namespace zt

namespace zt::trainer {

// [run]
struct RunSettings {
  std::string name;
  std::string task;  // "train" | "smoke"
  int64_t steps = 0;
  uint64_t seed = 0;
  std::string out_dir;
  int64_t log_every = 1;
  std::string compute;  // [precision] compute: "fp32" | "bf16" | "fp16", as runs describe it
  bool report = true;   // write <out_dir>/report.html at the end (trainer report)
};

// [data], with the run's seed.
struct DataSettings {
  std::string kind;        // "synthetic" | "text" | "tokens"
  std::string kind_where;  // "job.toml:11:8" for messages
  std::string path;
  std::string path_where;
  std::vector<std::string> paths;  // data.paths: a blend of files instead of data.path
  std::string paths_where;
  std::vector<double> weights;   // data.weights: each blended file's share ([] = by tokens)
  int element_size = 1;          // bytes per token of a file: 1 for text, 2 or 4 for tokens
  bool token_dtype_set = false;  // data.token_dtype given (else a prepared file's index decides)
  std::string token_dtype_where;
  std::string tokenizer;  // data.tokenizer: the encoding of the token files ('' = their index's)
  std::string tokenizer_where;
  std::string tokenizer_dir;  // data.tokenizer_dir ('' = the default search)
  int64_t micro_batch = 1;
  int64_t grad_accum = 1;
  uint64_t seed = 0;
  int64_t global_batch = 0;  // as configured; 0 = micro_batch x grad_accum x world
  std::string global_batch_where;
  std::string val_path;  // validation file ('' = none)
  std::string val_path_where;
  double val_fraction = 0;  // share of path's tokens held out for validation (0 = none)

  // data.path, or the blend's files with their weights ("a.bin x0.7 + b.bin x0.3"): what a
  // checkpoint records as the data it trained on.
  std::string source_name() const;
  // Samples one optimizer step of `world` ranks trains on.
  int64_t samples_per_step(int world) const { return micro_batch * grad_accum * world; }
  // Throws ConfigError (naming data.global_batch and the three factors) when a configured
  // global_batch is not samples_per_step(world).
  void check_global_batch(int world) const;
};

// [eval], the validation micro batch resolved (0 = data.micro_batch).
struct EvalSettings {
  int64_t every_steps = 0;  // 0 = never during training
  int64_t batches = 10;
  int64_t micro_batch = 1;
  bool at_end = true;
  bool has_data = false;  // data.val_path or data.val_fraction configured
  // Whether the run evaluates at all: every_steps > 0, or at the end with validation data.
  bool on() const { return every_steps > 0 || (at_end && has_data); }
  // After optimizer step `step` of a run of `total_steps`.
  bool due(int64_t step, int64_t total_steps) const {
    return (every_steps > 0 && step % every_steps == 0) || (on() && at_end && step == total_steps);
  }
};

// [checkpoint], the folder resolved ('' = <run.out_dir>/checkpoints).
struct CheckpointSettings {
  std::string dir;
  int64_t every_steps = 0;  // 0 = never save
  int64_t keep_last = 2;
  std::string keep_best;  // '' | 'val_loss': the best checkpoint is kept too (dir/best)
  bool async = true;
  std::string resume;        // '' | 'auto' | a path
  std::string resume_where;  // where checkpoint.resume was set (file:line, --resume), for messages
  std::chrono::milliseconds timeout{0};
  double min_interval_s = 0;  // a stop signal saves unless the newest checkpoint is younger
  bool save_on_stop = true;   // false: a stop signal ends the job without a save

  // After optimizer step `step` (1-based) of a run of `total_steps`: every every_steps steps
  // and after the last.
  bool due(int64_t step, int64_t total_steps) const;
  // "every N steps to DIR (async, keep last K)".
  std::string describe() const;
};

// [ab], the switch folder resolved ('' = <run.out_dir>/ab-switch).
struct AbSettings {
  std::vector<std::string> arms;  // each arm's overrides, as written
  std::string arms_where;         // where ab.arms was set, for messages
  int64_t switch_every = 10;
  std::string switch_dir;
  std::string switch_dir_where;
};

// [trace], the steps and folder resolved.
struct TraceSettings {
  bool enabled = false;
  int64_t first_step = 0;  // 1-based optimizer steps, inclusive
  int64_t last_step = 0;
  std::string dir;  // '' = <run.out_dir>/trace
  bool covers(int64_t step) const { return enabled && step >= first_step && step <= last_step; }
};

// The learning-rate schedule's keys of [run], the decay length resolved (0 = run.steps).
struct ScheduleSettings {
  std::string kind;  // "constant" | "cosine" | "linear"
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0.1;
  std::string warmup_type;  // "linear" | "log"
  double warmup_min_ratio = 0;
};

// [model] (and plugins.model): what the model layer builds. models/model.h resolves a shape.
struct ModelSettings {
  std::string kind;  // "gpt" | "mlp" | "torchscript" | "plugin"
  // torchscript
  std::string path;
  std::vector<std::string> units;  // [] = the top-level children
  std::string loss;                // "auto" | "method" | "cross_entropy" | "mse"
  std::vector<double> input_shape, target_shape;
  // gpt (0 = from the preset)
  std::string preset;
  int64_t n_layer = 0, n_head = 0, d_model = 0, seq_len = 0, vocab = 0;
  // mlp
  int64_t width = 0, depth = 0;
  std::string activation;
  bool activation_checkpointing = false;
  std::string init_from;    // a safetensors file to start from ('' = the seeded init)
  PluginChoice plugin;      // plugins.model, for kind "plugin"
  uint64_t seed = 0;        // run.seed: every kind's init
  bool byte_level = false;  // data.kind = "text": the vocabulary is the 256 bytes unless set
  KeyPlaces places;         // [model]'s keys, for messages
};

struct JobSettings {
  RunSettings run;
  DataSettings data;
  CheckpointSettings checkpoint;
  AbSettings ab;
  ScheduleSettings schedule;
  TraceSettings trace;
  EvalSettings eval;
  ModelSettings model;
  // The engine's, with data.grad_accum and model.activation_checkpointing in its options.
  EngineSettings engine;
  KeyPlaces places;           // every key of every section, for messages that name a knob
  std::string config_toml;    // the resolved config (Config::to_toml), which checkpoints record
  std::string config_source;  // the file it came from, for messages

  // Reads a config loaded with the trainer's sections (settings/trainer_config.h). Never throws
  // for such a config.
  static JobSettings of(const Config& config);
  // The same job with `overrides` ("section.key=value", as --set) applied to its resolved config:
  // a live-A/B arm, a tune trial. Throws what loading that config throws (ConfigError,
  // PluginError).
  static JobSettings with_overrides(const JobSettings& job,
                                    const std::vector<std::string>& overrides);
};

}  // namespace zt::trainer
