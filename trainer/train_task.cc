#include "train_task.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "data/data_source.h"
#include "engine_setup.h"
#include "memory_theory.h"
#include "models/model.h"
#include "offload_tiers.h"
#include "schedule.h"
#include "train_report.h"
#include "zt/blas.h"
#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/host_memory.h"

namespace zt::trainer {

namespace {

void check_global_batch(const Config& config, int world) {
  const Options& data = config.section("data");
  const int64_t per_step = data.get_int("micro_batch") * data.get_int("grad_accum") * world;
  if (data.get_int("global_batch") > 0 && data.get_int("global_batch") != per_step) {
    throw ConfigError(data.where("global_batch").str() +
                      ": data.global_batch = " + std::to_string(data.get_int("global_batch")) +
                      " does not equal micro_batch (" +
                      std::to_string(data.get_int("micro_batch")) + ") x grad_accum (" +
                      std::to_string(data.get_int("grad_accum")) + ") x ranks (" +
                      std::to_string(world) + ") = " + std::to_string(per_step) +
                      "; pick micro_batch and grad_accum so the "
                      "product divides out, or set global_batch = 0");
  }
}

// Host bytes the local ranks need for model states: every local rank builds the full fp32 model
// (4psi) before the engine shards it, then holds its model states, less what file tiers hold.
double host_model_state_bytes(const Config& config, int64_t psi, int world) {
  const int stage = static_cast<int>(config.section("zero").get_int("stage"));
  const bool low = config.section("precision").get_string("compute") != "fp32";
  const double local_ranks = config.section("launch").get_int("nproc");
  // Bytes offloaded to a file tier leave host memory: fp32 master + Adam states (12psi/N) and
  // stage 3 parameter shards.
  const Options& zero = config.section("zero");
  double offloaded = 0;
  if (offloads_to_files(config, "offload_optimizer")) {
    offloaded += zero.get_double("offload_optimizer_fraction") * 12.0 * psi / world;
  }
  if (offloads_to_files(config, "offload_param")) {
    offloaded += zero.get_double("offload_param_fraction") * (low ? 2.0 : 4.0) * psi / world;
  }
  const double states = theory_model_state_bytes(stage, psi, world, low,
                                                 separate_master_share(config));
  return local_ranks * (4.0 * psi - offloaded + states);
}

void check_memory_fits(const Config& config, int world) {
  const int64_t psi = models::parameter_count(models::resolve_model_shape(config));
  const double need = host_model_state_bytes(config, psi, world);
  const double limit_gb = config.section("launch").get_double("memory_limit_gb");
  const double limit = limit_gb > 0 ? limit_gb * kGiB : static_cast<double>(mem_available_bytes());
  if (limit > 0 && need > limit) {
    throw ConfigError(
        config.section("model").where("preset").str() + ": the model (" + std::to_string(psi) +
        " parameters) needs about " + gib_text(need) + " for model states on this host (" +
        std::to_string(config.section("launch").get_int("nproc")) + " rank(s), stage " +
        std::to_string(config.section("zero").get_int("stage")) + "), over the " + gib_text(limit) +
        (limit_gb > 0 ? " of launch.memory_limit_gb" : " available") +
        "; raise zero.stage, offload to files (plugins.offload_optimizer / offload_param = "
        "\"offload_nvme\"), use more ranks, or choose a smaller model");
  }
}

// Ranks of one host share its cores: LibTorch's default (all cores per process) oversubscribes
// them, which made a 2-rank job several times slower here.
void share_cores_between_local_ranks() {
  const char* local = std::getenv("LOCAL_WORLD_SIZE");
  int local_ranks = local ? std::max(1, std::atoi(local)) : 1;
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(std::max(1, cores / local_ranks));
}

// One rank's training run, in the order it is built: the model and the data outlive the engine
// (in `setup`), which refers to the model's units.
struct TrainRun {
  const Config& config;
  const RankEnv& env;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<data::DataSource> data;
  EngineSetup setup;
  int64_t next_sample = 0;  // where the next step's global batch starts in the data stream
};

std::vector<Unit*> unit_pointers(const models::Model& model) {
  std::vector<Unit*> units;
  for (const auto& u : model.units) units.push_back(u.get());
  return units;
}

void create_out_dir(const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw IoError("cannot create run.out_dir " + out_dir + ": " + ec.message());
}

// Rank 0's run header: the model, the composition, the data, where offloaded states go.
void print_run_header(const TrainRun& run) {
  const EngineSetup& s = run.setup;
  std::printf("zt train: %s\n  %d rank(s), %s, ZeRO stage %d, %s, %s, compute %s\n  data: %s\n",
              run.model->describe().c_str(), run.env.world, s.comm->describe().c_str(),
              s.options.stage, s.shard_id.c_str(), s.optimizer_id.c_str(),
              run.config.section("precision").get_string("compute").c_str(),
              run.data->describe().c_str());
  if (!s.tiers.describe().empty()) std::printf("  offload: %s\n", s.tiers.describe().c_str());
  std::printf("  %s\n", blas_header_line(probe_blas()).c_str());
  std::fflush(stdout);
}

double tokens_per_step(const TrainRun& run) {
  const models::ModelShape& shape = run.model->shape;
  const int64_t tokens_per_sample = shape.kind == "gpt" ? shape.seq_len : 1;
  return static_cast<double>(run.data->micro_batch() * run.setup.options.grad_accum *
                             run.env.world * tokens_per_sample);
}

// One optimizer step of data.grad_accum micro steps at `lr`, timed; the loss is the global
// batch's: the mean over ranks of each rank's mean.
StepMetrics train_step(TrainRun& run, int64_t step, double lr) {
  EngineSetup& s = run.setup;
  const auto t0 = std::chrono::steady_clock::now();
  double loss_sum = 0;
  for (int micro = 0; micro < s.options.grad_accum; ++micro) {
    data::Batch batch = run.data->get(run.next_sample, micro, run.env.rank, run.env.world);
    at::Tensor input = batch.input.is_floating_point() ? batch.input.to(s.options.compute_dtype)
                                                       : batch.input;
    loss_sum += s.engine->forward_backward(
        input, [&](const at::Tensor& out) { return run.model->loss(out, batch.target); });
  }
  StepReport rep = s.engine->step(lr);
  run.next_sample += run.data->samples_per_step(run.env.world);
  at::Tensor loss = at::tensor({loss_sum / s.options.grad_accum}, at::kDouble);
  s.comm->all_reduce(loss, ReduceOp::kAvg)->wait();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return StepMetrics{step + 1,      loss.item<double>(), lr,      rep.loss_scale,
                     rep.grad_norm, rep.skipped,         seconds, tokens_per_step(run) / seconds};
}

std::vector<RankMemory> all_ranks_memory(TrainRun& run) {
  const EngineSetup& s = run.setup;
  return gather_memory(*s.comm, measure_memory(s.engine->memory(), s.options.stage));
}

// Runs run.steps optimizer steps, logging each (rank 0 writes); returns the step totals.
TrainSummary train_loop(TrainRun& run, TrainReport& report) {
  const Options& options = run.config.section("run");
  TrainSummary summary;
  summary.steps = options.get_int("steps");
  const Schedule schedule{options.get_string("lr_schedule"), run.setup.optimizer->base_lr(),
                          options.get_int("warmup_steps"), summary.steps,
                          options.get_double("min_lr_ratio")};
  for (int64_t step = 0; step < summary.steps; ++step) {
    const StepMetrics m = train_step(run, step, schedule.lr(step));
    summary.seconds += m.step_seconds;
    summary.final_loss = m.loss;
    summary.skipped += m.skipped ? 1 : 0;
    report.log(m, all_ranks_memory(run), run.setup.comm->stats());
  }
  report.finish_progress();
  return summary;
}

// Fills what the summary shows beyond the step totals. Collective (every rank's memory).
void complete_summary(TrainRun& run, TrainSummary& summary) {
  const EngineSetup& s = run.setup;
  summary.memory = all_ranks_memory(run);
  summary.comm = s.comm->stats();
  summary.tokens_per_step = tokens_per_step(run);
  summary.parameters = s.engine->parameter_count();
  summary.stage = s.options.stage;
  summary.world = run.env.world;
  const bool low_precision = s.options.compute_dtype != at::kFloat;
  summary.theory_bytes = theory_model_state_bytes(s.options.stage, summary.parameters,
                                                  run.env.world, low_precision,
                                                  separate_master_share(run.config));
  for (const auto& [id, tier] : s.tiers.by_id) {
    summary.tiers.push_back(
        {id, id == s.tiers.optimizer_id, id == s.tiers.param_id, tier->stats()});
  }
  summary.out_dir = run.config.section("run").get_string("out_dir");
}

}  // namespace

void check_job_fits(const Config& config, int world) {
  check_global_batch(config, world);
  check_memory_fits(config, world);
}

int run_train(const Config& config, Store& store, const RankEnv& env,
              std::chrono::milliseconds timeout) {
  check_job_fits(config, env.world);
  share_cores_between_local_ranks();
  const bool leader = env.rank == 0;
  TrainRun run{config, env, models::make_model(config), nullptr, {}};
  run.data = data::make_data(config, run.model->shape);
  run.setup = build_engine_setup(config, env, store, timeout, unit_pointers(*run.model));
  const std::string out_dir = config.section("run").get_string("out_dir");
  if (leader) {
    create_out_dir(out_dir);
    print_run_header(run);
  }
  const Options& options = config.section("run");
  TrainReport report(leader ? out_dir + "/metrics.jsonl" : "", options.get_int("steps"),
                     options.get_int("log_every"));
  TrainSummary summary = train_loop(run, report);
  complete_summary(run, summary);
  if (leader) print_summary(summary);
  return 0;
}

}  // namespace zt::trainer
