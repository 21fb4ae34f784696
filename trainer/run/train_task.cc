#include "run/train_task.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <thread>

#include "ab/ab_html.h"
#include "ab/live_ab.h"
#include "ab/switch_folder.h"
#include "data/data_source.h"
#include "models/flops.h"
#include "models/init_from.h"
#include "models/model.h"
#include "models/torchscript.h"
#include "report/run_report.h"
#include "report/train_report.h"
#include "run/checkpointing.h"
#include "run/evaluation.h"
#include "run/loaded_model.h"
#include "run/peak_flops.h"
#include "run/rank0_step.h"
#include "run/schedule.h"
#include "run/step_trace.h"
#include "run/stop_signals.h"
#include "run/train_run.h"
#include "setup/memory_fit.h"
#include "setup/memory_theory.h"
#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/host/blas.h"
#include "zt/host/compose.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host/flight_recorder.h"
#include "zt/host/rank_agreement.h"
#include "zt/host/trace.h"
#include "zt/host_memory.h"

namespace zt::trainer {

namespace {

// What a rank stuck on its folders' storage is told (FileIoDeadline).
constexpr const char* kFolderIoWayOut =
    "check that the folder's storage answers; storage this slow but working needs a longer "
    "launch.timeout_s (each step of taking the job's folders may take half of it)";

void create_out_dir(const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw IoError("cannot create run.out_dir " + out_dir + ": " + ec.message());
}

// Rank 0's run header: the model, the composition, the data, where offloaded states go, where
// checkpoints go.
void print_run_header(const TrainRun& run, const CheckpointSettings& checkpoints) {
  const Composition& s = run.setup;
  std::printf("zt train: %s\n  %d rank(s), %s, ZeRO stage %d, %s, %s, compute %s\n  data: %s\n",
              run.model->describe().c_str(), run.env.world, s.comm->describe().c_str(),
              s.options.stage, s.shard_id.c_str(), s.optimizer_id.c_str(),
              run.settings.run.compute.c_str(), run.data->describe().c_str());
  if (!s.tiers.describe().empty()) std::printf("  offload: %s\n", s.tiers.describe().c_str());
  if (!s.codecs.empty()) std::printf("  codecs: %s\n", s.codecs.c_str());
  // Said only where it matters: an optimizer whose weight_decay option is 0 decays nothing.
  const PluginChoice& optimizer = run.settings.engine.optimizer;
  bool decays = true;
  if (optimizer.declares("weight_decay")) {
    const Value& wd = optimizer.options.get("weight_decay");
    decays = !((std::holds_alternative<double>(wd) && std::get<double>(wd) == 0) ||
               (std::holds_alternative<int64_t>(wd) && std::get<int64_t>(wd) == 0));
  }
  if (const std::vector<std::string> free = s.engine->decay_free_parameter_names();
      decays && !free.empty()) {
    std::printf("  weight decay: none on %zu of %zu tensors (zero.no_weight_decay), e.g. %s\n",
                free.size(), s.engine->parameter_names().size(), free.front().c_str());
  }
  if (!s.engine->weight_decay_warning().empty())
    std::fprintf(stderr, "zt: warning: %s\n", s.engine->weight_decay_warning().c_str());
  if (checkpoints.every_steps > 0)
    std::printf("  checkpoints: %s\n", checkpoints.describe().c_str());
  std::printf("  %s\n", blas_header_line(probe_blas()).c_str());
  std::printf("  %s\n", host_allocator_line().c_str());
  if (const std::string note = run.schedule.note(run.settings.run.steps); !note.empty())
    std::fprintf(stderr, "zt: warning: %s\n", note.c_str());
  std::fflush(stdout);
}

// Seeds LibTorch's default generators of the CPU and of the engine's device from (run.seed, rank,
// step): what a model's own randomness (a TorchScript module's dropout) draws from, on the host
// or on the GPU. Each rank draws its own masks, the same in every run of the job and after a
// resume, with no generator state to save.
void seed_step_randomness(const TrainRun& run, int64_t step) {
  uint64_t z = run.model->seed ^ (static_cast<uint64_t>(run.env.rank) << 48) ^
               (static_cast<uint64_t>(step) * 0x9e3779b97f4a7c15ULL);
  // splitmix64's finaliser: nearby (rank, step) pairs get unrelated seeds.
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  const c10::Device device = run.setup.options.device;
  for (at::Generator gen :
       {at::detail::getDefaultCPUGenerator(), at::globalContext().defaultGenerator(device)}) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(z);  // on the CPU both are the one generator: the same seed twice
  }
}

double tokens_per_step(const TrainRun& run) {
  const ModelInputs inputs = models::model_inputs(run.model->shape);
  const int64_t tokens_per_sample = inputs.tokens ? inputs.seq_len : 1;
  return static_cast<double>(run.data->micro_batch() * run.setup.options.grad_accum *
                             run.env.world * tokens_per_sample);
}

// One optimizer step of data.grad_accum micro steps at `lr`, timed; the loss is the global
// batch's: the mean over ranks of each rank's mean.
StepMetrics train_step(TrainRun& run, int64_t step, double lr) {
  Composition& s = run.setup;
  const trace::Scope span("step", step + 1, "", trace::kStep);
  const auto t0 = std::chrono::steady_clock::now();
  const EngineTimes engine_t0 = s.engine->times();
  seed_step_randomness(run, step);
  // Summed where the losses are, in double as one value each, and read once, after the step.
  at::Tensor loss_sum = at::zeros({1}, at::TensorOptions(at::kDouble).device(s.options.device));
  // Announced first: streamed optimizer states may then update in backward (Engine::begin_step).
  s.engine->begin_step(lr);
  for (int micro = 0; micro < s.options.grad_accum; ++micro) {
    std::optional<trace::Scope> loading(std::in_place, "data", trace::kData);
    data::Batch batch = run.data->get(run.next_sample, micro, run.env.rank, run.env.world);
    loading.reset();
    const at::Tensor input = engine_input(batch.input, s.options);
    const at::Tensor target = batch.target.to(s.options.device);
    loss_sum.add_(
        train_micro_step(*s.engine, run.own_forward, input,
                         [&](const at::Tensor& out) { return run.model->loss(out, target); })
            .to(at::kDouble)
            .reshape({1}));  // one value, whatever its shape
  }
  StepReport rep = s.engine->step(lr);
  run.next_sample += run.data->samples_per_step(run.env.world);
  at::Tensor loss = loss_sum.div_(static_cast<double>(s.options.grad_accum)).to(at::kCPU);
  all_reduce_host(*s.comm, loss, ReduceOp::kAvg);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  StepMetrics m{step + 1,      loss.item<double>(), lr,      rep.loss_scale,
                rep.grad_norm, rep.skipped,         seconds, tokens_per_step(run) / seconds};
  if (run.live.on()) m.arm = run.live.arms[run.arm].name;
  m.times = times_since(s.engine->times(), engine_t0);
  m.flops = run.flops_per_step;
  m.flops_per_s = m.flops / run.env.world / seconds;
  raise_peak(run.peak, m.flops_per_s);
  if (run.peak.per_rank > 0) m.mfu = m.flops_per_s / run.peak.per_rank;
  return m;
}

std::vector<RankMemory> all_ranks_memory(TrainRun& run) {
  const Composition& s = run.setup;
  return gather_memory(*s.comm, measure_memory(s.engine->memory(), s.options.stage));
}

// The trainer's state after `step` optimizer steps (run.next_sample already past them).
TrainerState trainer_state(const TrainRun& run, int64_t step) {
  TrainerState state = trainer_state_at(run.settings, run.env.world, step,
                                        run.setup.engine->optimizer_steps(), run.next_sample,
                                        run.schedule);
  if (run.data) state.data_split = run.data->held_out_split().where;
  return state;
}

// "world 2, ZeRO stage 3, shard_bucket, optim_hybrid_adam, no offload, compute fp32"
std::string saved_by(const TrainRun& run) {
  const Composition& s = run.setup;
  std::string offload;
  if (!s.tiers.optimizer_id.empty()) offload = "optimizer states -> " + s.tiers.optimizer_id;
  if (!s.tiers.param_id.empty())
    offload += (offload.empty() ? "" : ", ") + std::string("parameters -> ") + s.tiers.param_id;
  return "world " + std::to_string(run.env.world) + ", ZeRO stage " +
         std::to_string(s.options.stage) + ", " + s.shard_id + ", " + s.optimizer_id + ", " +
         (offload.empty() ? "no offload" : "offload " + offload) + ", compute " +
         run.settings.run.compute;
}

}  // namespace

// What the trainer adds to a checkpoint after `step`: its state, the config, who saved it.
CheckpointMeta checkpoint_meta(const TrainRun& run, int64_t step) {
  CheckpointMeta meta;
  meta.trainer_state = trainer_state(run, step).to_json();
  meta.config_toml = run.settings.config_toml;
  meta.saved_by = saved_by(run);
  return meta;
}

namespace {

// Shows and records a save that completed (rank 0, which published it).
void report_save(TrainRun& run, TrainReport& report, const std::optional<SaveStats>& save) {
  if (!save) return;
  run.newest_saved_step = save->step;
  run.newest_saved_at = std::chrono::steady_clock::now();
  if (run.env.rank != 0) return;
  int64_t bytes = 0;
  {
    // Storage that stops answering after a publish held rank 0 here while the others' next
    // collective timed out, and their flight records went to the same storage.
    const FileIoDeadline deadline("measuring the saved checkpoint " + save->folder,
                                  checkpoint_io_limit(run.timeout), kFolderIoWayOut);
    bytes = folder_bytes(save->folder);
  }
  report.log_checkpoint(
      {save->step, save->folder, bytes, save->stall_seconds, save->write_seconds});
}

// `val_loss`: the validation loss evaluated after this step, recorded in the manifest (what
// checkpoint.keep_best ranks by).
void save_if_due(TrainRun& run, TrainReport& report, TrainCheckpoints& checkpoints,
                 const CheckpointSettings& settings, int64_t step, std::optional<double> val_loss) {
  if (settings.due(step, run.settings.run.steps)) {
    CheckpointMeta meta = checkpoint_meta(run, step);
    if (val_loss) meta.metrics["val_loss"] = *val_loss;
    report_save(run, report, checkpoints.save(*run.setup.engine, step, meta));
  }
  report_save(run, report, checkpoints.poll());
}

// This rank's offload tiers' I/O so far, all tiers together.
OffloadStats tiers_io(const TrainRun& run) {
  OffloadStats sum;
  for (const auto& entry : run.setup.tiers.by_id) {
    const OffloadStats t = entry.second->stats();
    sum.bytes_read += t.bytes_read;
    sum.bytes_written += t.bytes_written;
    sum.reads += t.reads;
    sum.writes += t.writes;
  }
  return sum;
}

// A signal asked the job to stop after `step`: a checkpoint of it, unless this run's newest one
// (resumed from or saved) is of this step or younger than checkpoint.min_interval_s (rank 0
// decides, every rank follows), with `checkpoints` made for the occasion when the job saves none
// otherwise. Collective.
void save_before_stopping(TrainRun& run, TrainReport& report, const CheckpointSettings& settings,
                          TrainCheckpoints* checkpoints, int64_t step,
                          std::optional<double> val_loss) {
  std::unique_ptr<TrainCheckpoints> own;
  if (!checkpoints) {
    own = std::make_unique<TrainCheckpoints>(settings, *run.store, run.env.rank, run.env.world,
                                             checkpoint_job(run, *run.store, run.timeout));
    checkpoints = own.get();
  }
  // A save in flight that failed (rank 0's publish, this rank's part) does not end the stop
  // here: every rank must reach the vote below (the others waited in it until the launcher
  // killed them), and the stop's own checkpoint is what a requeued job resumes from.
  std::exception_ptr in_flight;
  try {
    report_save(run, report, checkpoints->finish());
  } catch (...) {
    in_flight = std::current_exception();
  }
  bool skip = false;
  if (run.env.rank == 0 && run.newest_saved_step >= 0 && !in_flight) {
    // The folder's `latest` is not asked: it may be another run's (this one resumed from an
    // older step), whose checkpoint the next --resume auto would then take for this run's.
    const std::chrono::duration<double> age = std::chrono::steady_clock::now() -
                                              run.newest_saved_at;
    const bool saved_now = run.newest_saved_at != std::chrono::steady_clock::time_point{} &&
                           age.count() < settings.min_interval_s;
    skip = run.newest_saved_step == step || saved_now;
  }
  if (max_over_ranks(*run.setup.comm, skip ? 1 : 0) > 0) {
    if (in_flight) std::rethrow_exception(in_flight);
    return;
  }
  CheckpointMeta meta = checkpoint_meta(run, step);
  // The step's evaluation, when it had one, as a periodic save records it: keep_best ranks it.
  if (val_loss) meta.metrics["val_loss"] = *val_loss;
  report_save(run, report, checkpoints->save(*run.setup.engine, step, meta));
  report_save(run, report, checkpoints->finish());
  if (!in_flight) return;
  try {
    std::rethrow_exception(in_flight);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "zt: [rank %d] warning: an earlier checkpoint failed (%s); the stop signal's "
                 "checkpoint of step %lld went ahead\n",
                 run.env.rank, e.what(), static_cast<long long>(step));
  }
}

// What a trace file says of its run: the composition, and the engine's own times of the traced
// steps (`bench trace` checks the file's spans against them).
std::string trace_metadata(const TrainRun& run) {
  const TraceSettings& t = run.settings.trace;
  const EngineTimes& e = run.traced_times;
  char times[320];
  std::snprintf(times, sizeof times,
                "{\"forward_backward\":%.6f,\"step\":%.6f,\"optimizer\":%.6f,"
                "\"comm_wait\":%.6f,\"read_wait\":%.6f,\"write_wait\":%.6f}",
                e.forward_backward, e.step, e.optimizer, e.comm_wait, e.read_wait, e.write_wait);
  return "{\"run\":" + trace::json_quote(run.settings.run.name) +
         ",\"rank\":" + std::to_string(run.env.rank) +
         ",\"world\":" + std::to_string(run.env.world) +
         ",\"model\":" + trace::json_quote(run.model->describe()) +
         ",\"composition\":" + trace::json_quote(saved_by(run)) + ",\"steps\":[" +
         std::to_string(t.first_step) + "," + std::to_string(t.last_step) +
         "],\"engine_times\":" + times + "}";
}

// Trains from run.first_step to run.steps, logging each step (rank 0 writes) and saving
// checkpoints when due; returns the step totals. A stop signal (stop_signals.h) ends it after
// the step in progress, with a checkpoint.
TrainSummary train_loop(TrainRun& run, TrainReport& report, const CheckpointSettings& settings,
                        TrainCheckpoints* checkpoints) {
  TrainSummary summary;
  summary.resumed_at = run.first_step;
  const int64_t total = run.settings.run.steps;
  for (int64_t step = run.first_step; step < total; ++step) {
    if (run.live.on() && run.live.arm_of_step(step) != run.arm) {
      const size_t to = run.live.arm_of_step(step);
      const double seconds = switch_arm(run, *run.store, run.timeout, to, step);
      report.log_switch(step, run.live.arms[to].name, arm_label(run.live.arms[to]), seconds);
    }
    run.trace->before_step(step + 1);
    report.start_step(job_comm_stats(run.setup), tiers_io(run));
    // The schedule counts applied updates: a step the loss scaler skips does not use up warmup
    // or decay (as DeepSpeed steps its scheduler only after an update).
    const StepMetrics m = train_step(run, step,
                                     run.schedule.lr(run.setup.engine->optimizer_steps()));
    if (run.settings.trace.covers(step + 1))
      run.traced_times = add_times(run.traced_times, m.times);
    ++summary.steps;
    summary.seconds += m.step_seconds;
    summary.final_loss = m.loss;
    summary.skipped += m.skipped ? 1 : 0;
    {
      const trace::Scope span("log metrics");
      report.log(m, all_ranks_memory(run), job_comm_stats(run.setup), tiers_io(run));
    }
    std::optional<double> val_loss;
    if (run.settings.eval.due(step + 1, total)) {
      const EvalEvent e = evaluate(*run.setup.engine, run.own_forward, *run.setup.comm, *run.model,
                                   *run.val_data, run.settings.eval, run.env.rank, run.env.world,
                                   run.setup.options, step + 1);
      report.log_eval(e);
      summary.val_step = e.step;
      summary.val_loss = e.loss;
      summary.val_perplexity = e.perplexity;
      val_loss = e.loss;
    }
    if (checkpoints) save_if_due(run, report, *checkpoints, settings, step + 1, val_loss);
    // The step's save is on its timeline.
    if (run.trace->after_step(step + 1)) run.trace->finish(trace_metadata(run));
    if (const int sig = agreed_stop_signal(*run.setup.comm); sig != 0) {
      if (settings.save_on_stop)
        save_before_stopping(run, report, settings, checkpoints, step + 1, val_loss);
      summary.stopped_by = sig;
      summary.stopped_after = step + 1;
      break;
    }
  }
  report.finish_progress();
  if (run.settings.trace.enabled) run.trace->finish(trace_metadata(run));
  if (checkpoints) report_save(run, report, checkpoints->finish());
  return summary;
}

// Loads `reader` into the engine (collective) and continues the saved run's step, data position
// and RNG.
void resume_from(TrainRun& run, const CheckpointReader& reader) {
  const TrainerState saved = TrainerState::from_json(reader.meta().trainer_state, reader.folder());
  check_same_model(reader.meta().config_toml, run.settings.config_toml, reader.folder());
  const auto t0 = std::chrono::steady_clock::now();
  run.setup.engine->load_checkpoint(reader);
  run.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  restore_cpu_rng_state(saved.rng_state, reader.folder());
  run.first_step = reader.step();
  run.newest_saved_step = reader.step();  // of unknown age: not "recent"
  run.next_sample = saved.next_sample;
  if (run.env.rank != 0) return;
  std::printf("resumed from %s at step %lld (saved by: %s; loaded in %.3f s)\n%s%s",
              reader.folder().c_str(), static_cast<long long>(reader.step()),
              reader.meta().saved_by.c_str(), run.load_seconds,
              resume_differences(saved, trainer_state(run, reader.step())).c_str(),
              (val_fraction_note(reader.meta().config_toml, run.settings.config_toml) +
               held_out_split_note(saved, reader.meta().config_toml,
                                   run.data ? run.data->held_out_split() : data::HeldOutSplit{},
                                   run.settings.config_toml) +
               unsaved_buffers_note(run.model->shape))
                  .c_str());
  std::fflush(stdout);
}

}  // namespace

// The job id the saver names its temporary folders by: the offload tiers' when there are any
// (drawn once per job), else the same rule's own.
std::string checkpoint_job(const TrainRun& run, Store& store, std::chrono::milliseconds timeout) {
  if (!run.setup.tiers.job.empty()) return run.setup.tiers.job;
  return offload_job_id(store, run.env.rank, timeout);
}

namespace {

bool nothing_left(const CheckpointReader& reader, int64_t steps, bool leader) {
  if (reader.step() < steps) return false;
  if (leader) {
    std::printf("checkpoint %s is at step %lld and run.steps = %lld: nothing left to train "
                "(raise run.steps to train further)\n",
                reader.folder().c_str(), static_cast<long long>(reader.step()),
                static_cast<long long>(steps));
  }
  return true;
}

// Fills what the summary shows beyond the step totals. Collective (every rank's memory).
void complete_summary(TrainRun& run, TrainSummary& summary) {
  const Composition& s = run.setup;
  summary.memory = all_ranks_memory(run);
  summary.comm = job_comm_stats(s);
  summary.comm_groups = s.engine->group_comm_stats();
  summary.sharding = s.engine->describe_sharding();
  summary.times = s.engine->times();
  summary.tokens_per_step = tokens_per_step(run);
  summary.parameters = s.engine->parameter_count();
  summary.stage = s.options.stage;
  summary.world = run.env.world;
  const EngineSettings& engine = run.live.on() ? run.live.settings[run.arm].engine
                                               : run.settings.engine;
  const OptimizerFootprint optimizer = optimizer_footprint(*s.optimizer);
  const TheoryDtypes dtypes{s.options.compute_dtype != at::kFloat, optimizer.state_bytes,
                            optimizer.master_bytes, optimizer.states};
  // MiCS: states are split over the shard group, not the world.
  const int sharding_world = s.options.shard_group_size > 0 ? s.options.shard_group_size
                                                            : run.env.world;
  summary.theory_bytes = theory_model_state_bytes(
      s.options.stage, summary.parameters, sharding_world, dtypes, separate_master_share(engine));
  for (const auto& [id, tier] : s.tiers.by_id) {
    summary.tiers.push_back(
        {id, id == s.tiers.optimizer_id, id == s.tiers.param_id, tier->stats()});
  }
  summary.out_dir = run.settings.run.out_dir;
  summary.flops_per_step = run.flops_per_step;
  summary.peak_per_rank = run.peak.per_rank;
  summary.peak_how = run.peak.how;
}

}  // namespace

void check_job_fits(const JobSettings& job, PluginCatalog& catalog, int world,
                    const FitCheck& how) {
  job.data.check_global_batch(world);
  // Arms that are bad or whose plugin is missing fail here; each arm's composition must fit.
  const LiveAb live = LiveAb::of(job, catalog);
  for (const JobSettings& arm : live.settings) check_memory_fits(arm, catalog, world, how);
  if (!live.on()) check_memory_fits(job, catalog, world, how);
}

namespace {

// The flight recorder of this rank: its size, where it dumps (a failure, a hang, SIGUSR2), and
// the training thread's lane name for it and for the trace.
void watch_collectives(const JobSettings& job, const RankEnv& env) {
  FlightRecorder& recorder = FlightRecorder::instance();
  recorder.set_capacity(static_cast<size_t>(job.engine.launch.flight_records));
  // Half of launch.timeout_s, as the folders' other files.
  recorder.set_dump_path(job.run.out_dir + "/flight/rank-" + std::to_string(env.rank) + ".json",
                         env.rank, env.world, checkpoint_io_limit(job.engine.launch.timeout));
  dump_flight_record_on_sigusr2();
  trace::name_this_thread("compute", true);
}

// The run as it trains: model, data (and a TorchScript module's first-batch check), the engine
// built unit by unit with its plugins and tiers, model.init_from, the model's buffers, the lr
// schedule. Collective.
void build_train_run(TrainRun& run, Store& store, std::chrono::milliseconds timeout,
                     bool resuming) {
  run.model = std::make_unique<models::Model>();
  run.model->shape = models::resolve_model_shape(run.settings.model, run.catalog);
  run.model->seed = run.settings.run.seed;
  run.source = models::make_model_source(run.model->shape, run.model->seed);
  run.data = data::make_data(run.settings.data, models::model_inputs(run.model->shape),
                             run.model->shape.kind);
  if (run.settings.eval.on()) {
    run.val_data = data::make_val_data(run.settings.data, models::model_inputs(run.model->shape),
                                       run.model->shape.kind, run.settings.eval.micro_batch);
  }
  // Before the engine takes the parameters and before anything is written: a module that does
  // not fit the data fails here with its own error.
  if (run.model->shape.custom) {
    run.own_forward = models::check_first_batch(*run.model->shape.custom, *run.data,
                                                run.settings.engine.options.stage);
  }
  run.store = &store;
  run.timeout = timeout;
  run.live = LiveAb::of(run.settings, run.catalog);
  if (run.live.on() && resuming) {
    throw ConfigError("a live A/B job ([ab] arms) cannot resume from a checkpoint yet; start it "
                      "fresh, or remove [ab] arms to resume the plain job");
  }
  // Partitioned construction: the engine builds one unit at a time and keeps its shards only.
  run.setup = compose(run.live.on() ? run.live.settings[0].engine : run.settings.engine,
                      run.catalog, run.env, store, timeout, *run.source);
  // A resume loads every parameter from the checkpoint: model.init_from's file is neither read
  // (a requeued fine-tune whose file has moved since failed) nor written only to be replaced.
  if (!resuming) {
    models::apply_init_from(*run.setup.engine, *run.setup.comm,
                            models::declared_parameters(*run.source), run.settings.model,
                            run.env.rank);
  }
  // The engine holds the initial values now: the file's copies can go.
  if (run.model->shape.custom) models::release_initial_values(*run.model->shape.custom);
  broadcast_model_buffers(run.model->shape, run.setup);
  run.schedule = schedule_of(run.settings.schedule, run.setup.optimizer->base_lr());
  run.trace = std::make_unique<StepTrace>(run.settings.trace, *run.setup.comm,
                                          checkpoint_io_limit(run.timeout));
  const TraceSettings& traced = run.settings.trace;
  if (traced.enabled && traced.first_step > run.settings.run.steps && run.env.rank == 0) {
    // Said, not refused: `trainer ab` and `tune` run the config's trials for fewer steps.
    std::printf("zt: note: trace.steps = [%lld, %lld] starts after the run's last step "
                "(run.steps = %lld): nothing is traced\n",
                static_cast<long long>(traced.first_step), static_cast<long long>(traced.last_step),
                static_cast<long long>(run.settings.run.steps));
  }
  run.flops_per_step = models::training_flops_per_sample(run.model->shape) *
                       static_cast<double>(run.data->samples_per_step(run.env.world));
  // The probe times the CPU's matmul, and its cache is keyed by the CPU: a GPU job's steps beat
  // it (MFU stuck at 100%) and raised the CPU's cached peak for every later CPU run.
  if (run.flops_per_step > 0 && run.setup.options.device.is_cpu()) {
    run.peak = peak_flops(*run.setup.comm, run.setup.options.compute_dtype);
  } else if (run.flops_per_step > 0) {
    run.peak.how = "no peak measured for " + run.setup.options.device.str();
  }
}

// What the run writes: the out_dir and its header (rank 0), the resumed state, the checkpoints
// it will save (when due) and metrics.jsonl, opened only after a resume succeeded, so the
// metrics of the run it continues are kept until then.
struct RunOutputs {
  std::unique_ptr<TrainCheckpoints> checkpoints;
  std::unique_ptr<TrainReport> report;
};

// How long one open, write or close of metrics.jsonl may block (TrainReport): half of
// launch.timeout_s, as a checkpoint load's calls, so that rank 0 is named before its peers'
// collectives time out; but no less than a save's file operations may take on what is most often
// the same storage, where a line may wait behind a save's writeback.
std::chrono::milliseconds metrics_io_limit(std::chrono::milliseconds launch_timeout,
                                           std::chrono::milliseconds checkpoint_timeout) {
  return std::max(checkpoint_io_limit(launch_timeout),
                  checkpoint_save_io_limit(checkpoint_timeout));
}

RunOutputs open_outputs(TrainRun& run, const CheckpointSettings& settings,
                        const CheckpointReader* resume) {
  const RunSettings& options = run.settings.run;
  const bool leader = run.env.rank == 0;
  const std::string& out_dir = options.out_dir;  // made by rank 0 before (run_train)
  if (leader) print_run_header(run, settings);
  if (resume) resume_from(run, *resume);
  RunOutputs out;
  if (settings.every_steps > 0) {
    out.checkpoints = std::make_unique<TrainCheckpoints>(
        settings, *run.store, run.env.rank, run.env.world,
        checkpoint_job(run, *run.store, run.timeout));
  }
  out.report = std::make_unique<TrainReport>(leader ? out_dir + "/metrics.jsonl" : "",
                                             options.steps, options.log_every, run.first_step,
                                             metrics_io_limit(run.timeout, settings.timeout));
  if (resume) out.report->log_resume(run.first_step, resume->folder(), run.load_seconds);
  if (run.live.on()) {
    std::vector<std::pair<std::string, std::vector<std::string>>> arms;
    for (const Arm& a : run.live.arms) arms.push_back({a.name, a.overrides});
    out.report->log_arms(arms);
  }
  return out;
}

// report.html of the run (a live A/B job's report.html is the A/B report: run-report.html). The
// training succeeded: a report that cannot be made is said, not turned into a failure; one whose
// storage does not answer within `io_limit` ends rank 0 naming it (the other ranks have exited 0,
// and a launcher waits for rank 0 for good).
void write_report_of_run(const std::string& out_dir, bool live_ab,
                         std::chrono::milliseconds io_limit) {
  const std::string path = out_dir + (live_ab ? "/run-report.html" : "/report.html");
  const FileIoDeadline deadline(
      "writing the run's report " + path + " from " + out_dir + "/metrics.jsonl", io_limit,
      "check that run.out_dir's storage answers; storage this slow but working needs a longer "
      "launch.timeout_s or checkpoint.timeout_s, or run.report = false");
  try {
    write_run_report(out_dir, path);
    std::printf("report: %s\n", path.c_str());
  } catch (const Error& e) {
    std::printf("report: not written: %s\n", e.what());
  }
  std::fflush(stdout);
}

// After the loop: the summary (collective), how to continue a job a signal stopped, and a live
// A/B job's report.
void finish_train(TrainRun& run, TrainSummary& summary, const CheckpointSettings& settings) {
  const RunSettings& options = run.settings.run;
  const bool leader = run.env.rank == 0;
  complete_summary(run, summary);
  keep_raised_peak(run.peak);
  if (leader) print_summary(summary);
  if (leader && summary.stopped_by != 0) {
    const std::string latest = latest_checkpoint(settings.dir);
    // Without a save at the stop, --resume auto goes back to the newest save, not to this step.
    std::printf("zt: %s%s after step %lld of %lld; %snewest checkpoint: %s; continue with "
                "--resume auto\n",
                kStoppedByPrefix, stop_signal_name(summary.stopped_by).c_str(),
                static_cast<long long>(summary.stopped_after),
                static_cast<long long>(options.steps),
                settings.save_on_stop ? ""
                                      : "nothing saved at the stop (checkpoint.save_on_stop = "
                                        "false); ",
                latest.empty() ? "none" : latest.c_str());
    std::fflush(stdout);
  }
  if (run.live.on()) finish_live_ab(run, options.out_dir, leader);
  if (leader && options.report)
    write_report_of_run(options.out_dir, run.live.on(),
                        metrics_io_limit(run.timeout, settings.timeout));
}

}  // namespace

int run_train(const JobSettings& job, PluginCatalog& catalog, Store& store, const RankEnv& env,
              std::chrono::milliseconds timeout) {
  const bool leader = env.rank == 0;
  // zt's launcher (and a single process, before it became the rank) checked the job before any
  // rank existed; ranks another launcher started check it here (torchrun, mpirun, srun).
  const bool checked = !env.found || env.zt_launched();
  check_job_fits(job, catalog, env.world, {!checked, leader, true});
  share_cores_between_local_ranks();
  watch_collectives(job, env);
  const CheckpointSettings& settings = job.checkpoint;
  // The folder is this job's until it ends; then no save runs yet, so what a stopped job's save
  // left is safe to remove. A folder not there yet is made and taken with the job's outputs
  // (below): a job refused while it is built leaves no folder behind.
  std::optional<CheckpointDirLock> dir_lock;
  if (leader) {
    // Its lookup and lock bounded as the taking below is: storage that stopped answering held
    // rank 0 here, and its peers' rendezvous timed out naming no file. (Not the removals after:
    // their work grows with what the stopped saves left.)
    const FileIoDeadline stuck("taking checkpoint.dir " + settings.dir,
                               checkpoint_io_limit(timeout), kFolderIoWayOut);
    std::error_code no_dir;
    if (std::filesystem::exists(settings.dir, no_dir)) dir_lock.emplace(settings.dir);
  }
  if (dir_lock) remove_stopped_saves(settings);
  // Opened before the engine is built, so a bad checkpoint fails fast.
  std::unique_ptr<CheckpointReader> resume;
  if (!settings.resume.empty()) {
    resume = open_rank0_checkpoint(
        [&] { return open_resume_checkpoint(settings, leader, timeout); },
        "checkpoint.resume = \"" + settings.resume + "\" (" + settings.resume_where +
            "; checkpoint.dir " + settings.dir + ")",
        settings.resume == "auto" ? settings.dir : settings.resume, store, "train/resume_from",
        env.rank, timeout);
  }
  if (resume && nothing_left(*resume, job.run.steps, leader)) return 0;
  TrainRun run{job, catalog, env, nullptr, nullptr, nullptr, nullptr, {}, {}};
  build_train_run(run, store, timeout, resume != nullptr);
  // ab.switch_dir is this job's until it ends (its lock, as checkpoint.dir's): what is saved
  // there now a live A/B job killed outright (SIGKILL, the OOM killer) left, its last switch's
  // model states, which on /dev/shm held memory until a reboot.
  std::optional<CheckpointDirLock> switch_lock;
  // Taken before the guard below: a job refused here must not remove the holder's states. Every
  // rank fails with rank 0's refusal.
  if (run.live.on()) {
    rank0_step(store, "train/switch_dir", env.rank, env.world, timeout, "take ab.switch_dir", [&] {
      const FileIoDeadline stuck("taking ab.switch_dir " + run.live.switch_dir,
                                 checkpoint_io_limit(timeout), kFolderIoWayOut);
      try {
        switch_lock.emplace(run.live.switch_dir);
      } catch (const Error& e) {
        // The lock's own words name checkpoint.dir, whose lock it is too.
        throw_of_kind(e.exit_code(),
                      job.ab.switch_dir_where + ": ab.switch_dir: " + e.what() +
                          " (here the folder is ab.switch_dir: give this job another one)");
      }
      for (const std::string& left :
           claim_switch_folder(run.live.switch_dir, job.ab.switch_dir_where)) {
        std::printf("ab: removed %s, model states a stopped live A/B job left\n", left.c_str());
      }
      std::fflush(stdout);
    });
  }
  // A live A/B job that fails leaves no copy of its model states in ab.switch_dir (tmpfs where
  // it is /dev/shm, and tune's failed trials left one each); the end of a good run removes it in
  // finish_live_ab.
  struct SwitchStatesOnFailure {
    const TrainRun& run;
    bool leader;
    int uncaught = std::uncaught_exceptions();
    ~SwitchStatesOnFailure() {
      if (!leader || !run.live.on() || std::uncaught_exceptions() <= uncaught) return;
      try {
        remove_switch_states(run.live.switch_dir);
      } catch (...) {  // the job's own error is the one to report
      }
    }
  } switch_states{run, leader};
  if (run.live.on()) check_switch_dir_shared(run, store, timeout);
  // The job's folders, taken and made by rank 0 now that the job is built; every rank fails with
  // its failure (an out_dir that cannot be made, another job that took checkpoint.dir first).
  rank0_step(store, "train/folders", env.rank, env.world, timeout, "take the job's folders", [&] {
    const FileIoDeadline stuck(
        "taking checkpoint.dir " + settings.dir + " and making run.out_dir " + job.run.out_dir,
        checkpoint_io_limit(timeout), kFolderIoWayOut);
    if (!dir_lock) dir_lock.emplace(settings.dir);
    create_out_dir(job.run.out_dir);
  });
  RunOutputs out = open_outputs(run, settings, resume.get());
  TrainSummary summary = train_loop(run, *out.report, settings, out.checkpoints.get());
  finish_train(run, summary, settings);
  return 0;
}

}  // namespace zt::trainer
