#include "settings/job_settings.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "settings/trainer_config.h"
#include "zt/error.h"
#include "zt/host/config.h"

namespace zt::trainer {

namespace {

RunSettings run_of(const Config& config) {
  const Options& run = config.section("run");
  RunSettings s;
  s.name = run.get_string("name");
  s.task = run.get_string("task");
  s.steps = run.get_int("steps");
  s.seed = static_cast<uint64_t>(run.get_int("seed"));
  s.out_dir = run.get_string("out_dir");
  s.log_every = run.get_int("log_every");
  s.compute = config.section("precision").get_string("compute");
  s.report = run.get_bool("report");
  return s;
}

DataSettings data_of(const Config& config) {
  const Options& data = config.section("data");
  DataSettings s;
  s.kind = data.get_string("kind");
  s.kind_where = data.where("kind").str();
  s.path = data.get_string("path");
  s.path_where = data.where("path").str();
  s.paths = data.get_string_list("paths");
  s.paths_where = data.where("paths").str();
  s.weights = data.get_double_list("weights");
  if (s.kind == "tokens") s.element_size = data.get_string("token_dtype") == "uint32" ? 4 : 2;
  s.token_dtype_set = data.is_set("token_dtype");
  s.token_dtype_where = data.where("token_dtype").str();
  s.tokenizer = data.get_string("tokenizer");
  s.tokenizer_where = data.where("tokenizer").str();
  s.tokenizer_dir = data.get_string("tokenizer_dir");
  s.micro_batch = data.get_int("micro_batch");
  s.grad_accum = data.get_int("grad_accum");
  s.seed = static_cast<uint64_t>(config.section("run").get_int("seed"));
  s.global_batch = data.get_int("global_batch");
  s.global_batch_where = data.where("global_batch").str();
  s.val_path = data.get_string("val_path");
  s.val_path_where = data.where("val_path").str();
  s.val_fraction = data.get_double("val_fraction");
  return s;
}

EvalSettings eval_of(const Config& config, const DataSettings& data) {
  const Options& e = config.section("eval");
  EvalSettings s;
  s.every_steps = e.get_int("every_steps");
  s.batches = e.get_int("batches");
  s.micro_batch = e.get_int("micro_batch") > 0 ? e.get_int("micro_batch") : data.micro_batch;
  s.at_end = e.get_bool("at_end");
  s.has_data = !data.val_path.empty() || data.val_fraction > 0;
  return s;
}

CheckpointSettings checkpoint_of(const Config& config, const RunSettings& run) {
  const Options& c = config.section("checkpoint");
  CheckpointSettings s;
  s.dir = c.get_string("dir");
  if (s.dir.empty()) s.dir = run.out_dir + "/checkpoints";
  s.every_steps = c.get_int("every_steps");
  s.keep_last = c.get_int("keep_last");
  s.keep_best = c.get_string("keep_best");
  s.async = c.get_bool("async");
  s.resume = c.get_string("resume");
  s.resume_where = c.where("resume").str();
  s.timeout = std::chrono::milliseconds(std::llround(c.get_double("timeout_s") * 1000));
  s.min_interval_s = c.get_double("min_interval_s");
  s.save_on_stop = c.get_bool("save_on_stop");
  return s;
}

AbSettings ab_of(const Config& config, const RunSettings& run) {
  const Options& ab = config.section("ab");
  AbSettings s;
  s.arms = ab.get_string_list("arms");
  s.arms_where = ab.where("arms").str();
  s.switch_every = ab.get_int("switch_every");
  s.switch_dir = ab.get_string("switch_dir");
  if (s.switch_dir.empty()) s.switch_dir = run.out_dir + "/ab-switch";
  s.switch_dir_where = ab.where("switch_dir").str();
  return s;
}

ScheduleSettings schedule_of(const Config& config) {
  const Options& run = config.section("run");
  ScheduleSettings s;
  s.kind = run.get_string("lr_schedule");
  s.warmup_steps = run.get_int("warmup_steps");
  const int64_t decay = run.get_int("decay_steps");
  s.total_steps = decay > 0 ? decay : run.get_int("steps");
  s.min_lr_ratio = run.get_double("min_lr_ratio");
  s.warmup_type = run.get_string("warmup_type");
  s.warmup_min_ratio = run.get_double("warmup_min_ratio");
  return s;
}

// Default steps: three after the first two (which warm up allocator and caches), within the run.
TraceSettings trace_of(const Config& config, const RunSettings& run) {
  const Options& t = config.section("trace");
  TraceSettings s;
  s.enabled = t.get_bool("enabled");
  const std::vector<double> steps = t.get_double_list("steps");
  if (steps.size() == 2) {
    s.first_step = static_cast<int64_t>(steps[0]);
    s.last_step = static_cast<int64_t>(steps[1]);
  } else {
    s.first_step = std::min<int64_t>(3, run.steps);
    s.last_step = std::min<int64_t>(s.first_step + 2, run.steps);
  }
  s.dir = t.get_string("dir");
  if (s.dir.empty()) s.dir = run.out_dir + "/trace";
  return s;
}

ModelSettings model_of(const Config& config, const RunSettings& run, const DataSettings& data,
                       const EngineSettings& engine) {
  const Options& m = config.section("model");
  ModelSettings s;
  s.kind = m.get_string("kind");
  s.path = m.get_string("path");
  s.units = m.get_string_list("units");
  s.loss = m.get_string("loss");
  s.input_shape = m.get_double_list("input_shape");
  s.target_shape = m.get_double_list("target_shape");
  s.preset = m.get_string("preset");
  s.n_layer = m.get_int("n_layer");
  s.n_head = m.get_int("n_head");
  s.d_model = m.get_int("d_model");
  s.seq_len = m.get_int("seq_len");
  s.vocab = m.get_int("vocab");
  s.width = m.get_int("width");
  s.depth = m.get_int("depth");
  s.activation = m.get_string("activation");
  s.activation_checkpointing = m.get_bool("activation_checkpointing");
  s.init_from = m.get_string("init_from");
  s.plugin = engine.model;
  s.seed = run.seed;
  s.byte_level = data.kind == "text";
  s.places.add(m);
  return s;
}

}  // namespace

std::string DataSettings::source_name() const {
  if (paths.empty()) return path;
  std::string out;
  for (size_t i = 0; i < paths.size(); ++i) {
    out += (i ? " + " : "") + paths[i];
    if (i < weights.size()) {
      std::ostringstream w;
      w << " x" << weights[i];
      out += w.str();
    }
  }
  return out;
}

void DataSettings::check_global_batch(int world) const {
  const int64_t per_step = samples_per_step(world);
  if (global_batch > 0 && global_batch != per_step) {
    throw ConfigError(global_batch_where + ": data.global_batch = " + std::to_string(global_batch) +
                      " does not equal micro_batch (" + std::to_string(micro_batch) +
                      ") x grad_accum (" + std::to_string(grad_accum) + ") x ranks (" +
                      std::to_string(world) + ") = " + std::to_string(per_step) +
                      "; pick micro_batch and grad_accum so the product divides out, or set "
                      "global_batch = 0");
  }
}

bool CheckpointSettings::due(int64_t step, int64_t total_steps) const {
  return every_steps > 0 && (step % every_steps == 0 || step == total_steps);
}

std::string CheckpointSettings::describe() const {
  return "every " + std::to_string(every_steps) + " steps to " + dir + " (" +
         (async ? "async" : "sync") + ", keep " +
         (keep_last > 0 ? "last " + std::to_string(keep_last) : std::string("all")) +
         (keep_best.empty() ? "" : " and the best " + keep_best) + ")";
}

JobSettings JobSettings::of(const Config& config) {
  JobSettings s;
  s.run = run_of(config);
  s.data = data_of(config);
  s.checkpoint = checkpoint_of(config, s.run);
  s.ab = ab_of(config, s.run);
  s.schedule = schedule_of(config);
  s.trace = trace_of(config, s.run);
  s.eval = eval_of(config, s.data);
  s.engine = EngineSettings::of(config);
  s.model = model_of(config, s.run, s.data, s.engine);
  s.engine.options.grad_accum = s.data.grad_accum;
  s.engine.options.activation_checkpointing = s.model.activation_checkpointing;
  for (const SectionSpec& section : config_schema()) s.places.add(config.section(section.name));
  s.config_toml = config.to_toml();
  s.config_source = config.source();
  return s;
}

JobSettings JobSettings::with_overrides(const JobSettings& job,
                                        const std::vector<std::string>& overrides) {
  // Its text is the resolved configuration, whose lines are not the user's file's: an error
  // names it so (a place in "job.toml:97" of a 20-line file sent people looking in vain).
  const std::string resolved = "the resolved configuration of ";
  const std::string source = job.config_source.rfind(resolved, 0) == 0
                                 ? job.config_source
                                 : resolved + job.config_source + " (trainer --print-config)";
  return of(load_config_string(job.config_toml, source, overrides));
}

}  // namespace zt::trainer
