#include "settings/trainer_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>

namespace zt::trainer {

namespace {

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
       // Bounded so parameter and FLOP counts (12 x d_model^2 x n_layer, vocab x d_model, ...)
       // stay far inside int64.
       opt_int("n_layer", 0, "GPT blocks (0 = from preset)", 0, 1 << 16),
       opt_int("n_head", 0, "GPT attention heads (0 = from preset)", 0, 1 << 16),
       opt_int("d_model", 0, "GPT width (0 = from preset)", 0, 1 << 20),
       opt_int("seq_len", 0, "GPT context length (0 = from preset)", 0, 1 << 24),
       opt_int("vocab", 0, "GPT vocabulary (0 = from preset; 256 for byte-level text)", 0,
               int64_t{1} << 32),
       opt_bool("activation_checkpointing", false,
                "recompute each unit's activations in "
                "backward: less memory, about one more forward"),
       opt_string("init_from", "",
                  "a safetensors file to start from instead of the seeded init (fine-tuning): "
                  "GPT tensors under Hugging Face GPT-2 names, as `trainer export` writes them"),
       opt_int("width", 1024, "MLP layer width", 1, 1 << 20),
       opt_int("depth", 8, "MLP layers, each its own unit", 1, 1 << 16),
       opt_string("activation", "relu", "MLP activation", {"none", "relu", "gelu"})}};
}

SectionSpec data_section() {
  return {
      "data",
      "the training data",
      {opt_string("kind", "synthetic", "data source", {"synthetic", "text", "tokens"}),
       opt_string("path", "", "file for kind 'text' (any bytes) or 'tokens' (flat binary)"),
       opt_string_list("paths", {},
                       "a blend instead of data.path: files of data.kind, each sample drawn from "
                       "one of them with data.weights' odds (as Megatron's data blend)"),
       opt_double_list("weights", {},
                       "each data.paths file's share of the samples ([] = in proportion to the "
                       "files' tokens)"),
       opt_string("token_dtype", "uint16",
                  "element type of a 'tokens' file (a prepared file's index gives it)",
                  {"uint16", "uint32"}),
       opt_string("tokenizer", "",
                  "the BPE encoding of the text ('gpt2', 'cl100k_base', ...): a prepared file "
                  "made with another is refused; sample and eval decode with it ('' = the "
                  "prepared file's)"),
       opt_string("tokenizer_dir", "",
                  "where the encodings' files are ('' = $ZT_TOKENIZER_DIR, else the source "
                  "tree's .tools/node_modules, where scripts/setup.sh installs them)"),
       // Bounded so micro_batch x grad_accum x ranks stays far inside int64.
       opt_int("micro_batch", 4, "samples per rank per micro step", 1, 1 << 20),
       opt_int("grad_accum", 1, "micro steps accumulated per optimizer step", 1, 1 << 20),
       opt_int("global_batch", 0,
               "samples per optimizer step over all ranks; must equal "
               "micro_batch * grad_accum * world (0 = that product)",
               0),
       opt_string("val_path", "",
                  "validation data ([eval]): a second file of the same kind as data.path"),
       opt_double("val_fraction", 0,
                  "validation data ([eval]): the last share of data.path's tokens, held out: "
                  "no training sample reaches into it; in a prepared file it starts at a "
                  "document's start near the share's token (0 = none; below 1)",
                  0, 1)}};
}

SectionSpec eval_section() {
  return {
      "eval",
      "validation while training: the loss on held-out data (data.val_path, "
      "data.val_fraction, or for synthetic data a stream of its own)",
      {opt_int("every_steps", 0, "evaluate every N optimizer steps; 0 = never", 0),
       opt_int("batches", 10,
               "validation batches of eval.micro_batch samples per evaluation (the same "
               "samples every time, shared out among the ranks)",
               1, 1 << 20),
       // Bounded as data.micro_batch: batches x micro_batch stays inside int64.
       opt_int("micro_batch", 0, "samples per validation batch (0 = data.micro_batch)", 0, 1 << 20),
       opt_bool("at_end", true,
                "evaluate after the last step too (when validation data is configured or "
                "every_steps > 0)")}};
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
       opt_bool("save_on_stop", true,
                "a stop signal (SIGTERM, SIGINT, SIGUSR1) saves a checkpoint before the job "
                "exits; false stops without one (trainer tune's trials)"),
       opt_string("dir", "", "folder of the checkpoints ('' = <run.out_dir>/checkpoints)"),
       opt_int("keep_last", 2, "complete checkpoints kept; older ones are removed (0 = all)", 0),
       opt_string("keep_best", "",
                  "'val_loss': also keep the checkpoint of the lowest validation loss ([eval]; "
                  "from Python, save_checkpoint's metrics), named in <dir>/best; '' = only the "
                  "keep_last newest",
                  {"", "val_loss"}),
       opt_bool("async", true,
                "the step waits only for a copy of the bytes in memory; the files are "
                "written while training goes on"),
       opt_string("resume", "",
                  "'' = start fresh, 'auto' = from the newest checkpoint in dir (fresh if "
                  "none), or a checkpoint folder (trainer --resume sets it)"),
       opt_double("timeout_s", 600,
                  "bound on a save's waits: the previous save, the other ranks' files; half of it "
                  "(at least 10 s) bounds each file operation of a save (storage that stopped "
                  "answering ends the rank)",
                  1, 604800)}};
}

SectionSpec ab_section() {
  return {
      "ab",
      "live A/B inside one training job: the arms alternate every switch_every steps",
      {opt_string_list("arms", {},
                       "each arm's overrides, comma-separated as trainer ab's --a/--b "
                       "(e.g. \"plugins.shard=shard_tensor\"); two to eight switch the job "
                       "between them, resharding its state at a step boundary"),
       opt_int("switch_every", 10, "optimizer steps an arm trains before the next takes over", 1),
       opt_string("switch_dir", "",
                  "folder the state passes through at a switch ('' = "
                  "<run.out_dir>/ab-switch); removed at the end")}};
}

SectionSpec trace_section() {
  return {"trace",
          "a timeline of every rank (Trace Event JSON: Perfetto, chrome://tracing, speedscope)",
          {opt_bool("enabled", false, "record the steps below into <dir>/rank-N.json"),
           opt_double_list("steps", {},
                           "[first, last] optimizer steps to record (1-based, inclusive); [] = "
                           "3 steps after the first two"),
           opt_string("dir", "", "folder of the trace files ('' = <run.out_dir>/trace)")}};
}

// The report key of [run]: what the run leaves besides metrics.jsonl.
SectionSpec run_report_keys() {
  return {"run",
          "",
          {opt_bool("report", true,
                    "write <out_dir>/report.html at the end (trainer report RUN_DIR does it "
                    "later)")}};
}

// The learning-rate schedule's keys, in [run] beside the steps they count.
SectionSpec run_schedule_keys() {
  return {
      "run",
      "",
      {opt_string("lr_schedule", "constant",
                  "learning-rate schedule after the warm-up: constant, cosine decay or "
                  "linear decay to min_lr_ratio * lr",
                  {"constant", "cosine", "linear"}),
       opt_int("warmup_steps", 0, "steps of warm-up from warmup_min_ratio * lr to lr", 0),
       opt_string("warmup_type", "linear", "warm-up curve: linear, or log (fast first)",
                  {"linear", "log"}),
       opt_double("warmup_min_ratio", 0,
                  "where the warm-up rises from, as a fraction of lr: its step k of warmup_steps "
                  "(from 1) takes lr x (ratio + (1 - ratio) x k / warmup_steps), linear",
                  0, 1),
       opt_double("min_lr_ratio", 0.1,
                  "cosine/linear: the floor, as a fraction of lr, that 0-based step decay_steps "
                  "reaches (as Hugging Face's schedules, the last step of a run as long as its "
                  "decay is one step above it)",
                  0, 1),
       opt_int("decay_steps", 0,
               "cosine/linear: the step, counted from the run's start, where the decay reaches "
               "the floor (0 = run.steps)",
               0)}};
}

// The rules across the trainer's keys.

void model_plugin_both_ways(const Config& config, ConfigBreaks& broken) {
  const Options& model = config.section("model");
  const Options& plugins = config.section("plugins");
  const bool plugin_model = model.get_string("kind") == "plugin";
  if (plugin_model == !plugins.get_string("model").empty()) return;
  broken.push_back(plugin_model
                       ? key_at(model, "kind") +
                             ": model.kind = \"plugin\" needs plugins.model = \"<id>\", the model "
                             "plugin to train; `trainer plugins list` shows the installed ones"
                       : key_at(plugins, "model") + ": plugins.model = \"" +
                             plugins.get_string("model") +
                             "\" needs model.kind = \"plugin\" (it is \"" +
                             model.get_string("kind") + "\" at " + key_at(model, "kind") +
                             "); set both, or remove plugins.model to train the built-in model");
}

void torchscript_needs_path(const Config& config, ConfigBreaks& broken) {
  const Options& model = config.section("model");
  if (model.get_string("kind") != "torchscript" || !model.get_string("path").empty()) return;
  broken.push_back(key_at(model, "kind") +
                   ": model.kind = \"torchscript\" needs model.path, the file "
                   "torch.jit.script(module).save(path) wrote");
}

void trace_steps_are_a_range(const Config& config, ConfigBreaks& broken) {
  const Options& trace = config.section("trace");
  const std::vector<double> steps = trace.get_double_list("steps");
  if (steps.empty()) return;
  const bool ints = steps.size() == 2 && steps[0] == std::floor(steps[0]) &&
                    steps[1] == std::floor(steps[1]);
  // Whole numbers an int64 holds (1e300 was cast to one, which is undefined).
  constexpr double kLast = 9007199254740992.0;  // 2^53
  if (ints && steps[0] >= 1 && steps[1] >= steps[0] && steps[1] <= kLast) return;
  broken.push_back(key_at(trace, "steps") +
                   ": trace.steps must be [first, last], whole steps with 1 <= first <= last "
                   "<= 2^53 (e.g. [3, 5]), or [] for the default");
}

void validation_data_fits(const Config& config, ConfigBreaks& broken) {
  const Options& data = config.section("data");
  const bool synthetic = data.get_string("kind") == "synthetic";
  const bool path = !data.get_string("val_path").empty();
  const double fraction = data.get_double("val_fraction");
  if (fraction >= 1) {
    broken.push_back(key_at(data, "val_fraction") +
                     ": data.val_fraction must be below 1 (it is the share of data.path held "
                     "out for validation; the rest trains)");
  }
  if (path && fraction > 0) {
    broken.push_back(key_at(data, "val_fraction") + ": data.val_fraction and data.val_path (" +
                     key_at(data, "val_path") + ") both name validation data; keep one");
  }
  if (path) {
    // Validation on the training file measures windows the job trains on: the loss (and
    // checkpoint.keep_best's choice) would reward memorising them.
    // Absolute first: a relative path that does not exist yet comes back unchanged.
    const auto resolved = [](const std::string& p) {
      std::error_code ec;
      const std::filesystem::path file = std::filesystem::weakly_canonical(
          std::filesystem::absolute(p, ec), ec);
      return ec ? std::filesystem::path(p).lexically_normal() : file;
    };
    const std::filesystem::path validation = resolved(data.get_string("val_path"));
    const auto same_file = [&](const std::string& other) {
      return !other.empty() && resolved(other) == validation;
    };
    std::vector<std::string> trained = data.get_string_list("paths");
    trained.push_back(data.get_string("path"));
    if (std::any_of(trained.begin(), trained.end(), same_file)) {
      broken.push_back(key_at(data, "val_path") +
                       ": data.val_path names a file the job trains on (" +
                       data.get_string("val_path") +
                       "); give held-out data, or data.val_fraction to hold out the end of "
                       "data.path");
    }
  }
  if (synthetic && (path || fraction > 0)) {
    broken.push_back(key_at(data, path ? "val_path" : "val_fraction") +
                     ": synthetic data validates on a seeded stream of its own; remove data." +
                     (path ? "val_path" : "val_fraction"));
  }
  const Options& eval = config.section("eval");
  if (!synthetic && !path && fraction <= 0 && eval.get_int("every_steps") > 0) {
    broken.push_back(key_at(eval, "every_steps") +
                     ": eval.every_steps needs validation data: data.val_path (a second file) "
                     "or data.val_fraction (a held-out share of data.path)");
  }
}

// Every checkpoint must have a validation loss to rank, as Hugging Face's load_best_model_at_end
// asks save_steps to be a multiple of eval_steps.
void keep_best_has_losses(const Config& config, ConfigBreaks& broken) {
  const Options& checkpoint = config.section("checkpoint");
  if (checkpoint.get_string("keep_best").empty()) return;
  const Options& eval = config.section("eval");
  const int64_t eval_every = eval.get_int("every_steps");
  const int64_t save_every = checkpoint.get_int("every_steps");
  const std::string key = key_at(checkpoint, "keep_best") +
                          ": checkpoint.keep_best = \"val_loss\" ";
  if (eval_every <= 0) {
    broken.push_back(key + "ranks checkpoints by their validation loss, but eval.every_steps is " +
                     "0; set [eval] every_steps (and validation data: data.val_path or "
                     "data.val_fraction), or remove keep_best");
  } else if (save_every <= 0) {
    broken.push_back(key +
                     "needs checkpoints: set checkpoint.every_steps (a multiple of "
                     "eval.every_steps = " +
                     std::to_string(eval_every) + ")");
  } else if (save_every % eval_every != 0) {
    broken.push_back(key + "needs a validation loss at every checkpoint: checkpoint.every_steps (" +
                     std::to_string(save_every) + ", " + key_at(checkpoint, "every_steps") +
                     ") must be a multiple of eval.every_steps (" + std::to_string(eval_every) +
                     ", " + key_at(eval, "every_steps") + ")");
  }
}

void file_data_needs_path(const Config& config, ConfigBreaks& broken) {
  const Options& data = config.section("data");
  const bool one = !data.get_string("path").empty();
  const std::vector<std::string>& blend = data.get_string_list("paths");
  const std::vector<double>& weights = data.get_double_list("weights");
  if (data.get_string("kind") == "synthetic") {
    if (!blend.empty()) {
      broken.push_back(key_at(data, "paths") +
                       ": data.paths blends files; synthetic data has none "
                       "(set data.kind = \"tokens\" or \"text\", or remove data.paths)");
    }
    return;
  }
  if (one && !blend.empty()) {
    broken.push_back(key_at(data, "paths") + ": data.paths and data.path (" + key_at(data, "path") +
                     ") both name the training data; keep one (a blend of one file is data.path)");
  } else if (!one && blend.empty()) {
    broken.push_back(key_at(data, "kind") + ": data.kind = \"" + data.get_string("kind") +
                     "\" needs data.path (or data.paths, a blend)");
  }
  if (!weights.empty() && weights.size() != blend.size()) {
    broken.push_back(key_at(data, "weights") + ": data.weights has " +
                     std::to_string(weights.size()) + " entries for the " +
                     std::to_string(blend.size()) +
                     " files of data.paths; give one per file, or "
                     "[] for shares by size");
  }
  const bool positive = std::all_of(weights.begin(), weights.end(),
                                    [](double w) { return w >= 0 && std::isfinite(w); }) &&
                        std::any_of(weights.begin(), weights.end(), [](double w) { return w > 0; });
  if (!weights.empty() && !positive) {
    broken.push_back(key_at(data, "weights") + ": data.weights must be finite, none negative, and "
                                               "some above 0");
  }
}

}  // namespace

void declare_trainer_config() {
  static std::once_flag declared;
  std::call_once(declared, [] {
    add_config_sections(
        {run_schedule_keys(), run_report_keys(), model_section(), data_section(),
         checkpoint_section(), ab_section(), trace_section(), eval_section()},
        {{"model.kind plugin and plugins.model go together", model_plugin_both_ways},
         {"a torchscript model needs model.path", torchscript_needs_path},
         {"file data needs data.path", file_data_needs_path},
         {"validation data is one of a file, a held-out share or a stream", validation_data_fits},
         {"checkpoint.keep_best has a validation loss at every checkpoint", keep_best_has_losses},
         {"trace.steps is a range of steps", trace_steps_are_a_range}});
  });
}

Config load_config_file(const std::string& path, const std::vector<std::string>& overrides,
                        const std::vector<ConfigSetting>& base) {
  declare_trainer_config();
  return Config::load_file(path, overrides, base);
}

Config load_config_string(const std::string& toml_text, const std::string& source_name,
                          const std::vector<std::string>& overrides,
                          const std::vector<ConfigSetting>& base) {
  declare_trainer_config();
  return Config::load_string(toml_text, source_name, overrides, base);
}

}  // namespace zt::trainer
