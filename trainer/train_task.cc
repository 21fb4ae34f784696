#include "train_task.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "data/data_source.h"
#include "memory_theory.h"
#include "models/model.h"
#include "offload_tiers.h"
#include "schedule.h"
#include "train_report.h"
#include "zt/blas.h"
#include "zt/engine.h"
#include "zt/error.h"
#include "zt/optimizer.h"
#include "zt/plugin_loader.h"
#include "zt/shard_strategy.h"

namespace zt::trainer {

namespace {

// Parameters of the model config describes, without building it (a model too large to build
// must fail before it is built).
int64_t parameter_count(const models::ModelShape& s) {
  if (s.kind == "mlp") return s.depth * (s.width * s.width + s.width);
  const int64_t d = s.d_model;
  // Per block: 2 LayerNorms (4d), qkv (3d^2 + 3d), attention out (d^2 + d), MLP (8d^2 + 5d).
  return s.n_layer * (12 * d * d + 13 * d) + s.vocab * d + s.seq_len * d + 2 * d;
}

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / (1 << 30));
  return buf;
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / (1 << 20));
  return buf;
}

}  // namespace

void check_job_fits(const Config& config, int world) {
  const Options& data = config.section("data");
  const int64_t per_step = data.get_int("micro_batch") * data.get_int("grad_accum") * world;
  if (data.get_int("global_batch") > 0 && data.get_int("global_batch") != per_step) {
    throw ConfigError(data.where("global_batch").str() + ": data.global_batch = " +
                      std::to_string(data.get_int("global_batch")) + " does not equal micro_batch (" +
                      std::to_string(data.get_int("micro_batch")) + ") x grad_accum (" +
                      std::to_string(data.get_int("grad_accum")) + ") x ranks (" + std::to_string(world) +
                      ") = " + std::to_string(per_step) + "; pick micro_batch and grad_accum so the "
                      "product divides out, or set global_batch = 0");
  }
  models::ModelShape shape = models::resolve_model_shape(config);
  const int64_t psi = parameter_count(shape);
  const int stage = static_cast<int>(config.section("zero").get_int("stage"));
  const bool low = config.section("precision").get_string("compute") != "fp32";
  // Every local rank builds the full fp32 model before the engine shards it, then holds its
  // model states; ranks of this host share the limit.
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
  const double need = local_ranks * (4.0 * psi - offloaded +
                                     theory_model_state_bytes(stage, psi, world, low, separate_master_share(config)));
  const double limit_gb = config.section("launch").get_double("memory_limit_gb");
  const double limit = limit_gb > 0 ? limit_gb * (1 << 30) : static_cast<double>(available_memory_bytes());
  if (limit > 0 && need > limit) {
    throw ConfigError(config.section("model").where("preset").str() + ": the model (" +
                      std::to_string(psi) + " parameters) needs about " + gib(need) +
                      " for model states on this host (" + std::to_string(static_cast<int>(local_ranks)) +
                      " rank(s), stage " + std::to_string(stage) + "), over the " + gib(limit) +
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

int run_train(const Config& config, Store& store, const RankEnv& env,
              std::chrono::milliseconds timeout) {
  check_job_fits(config, env.world);
  share_cores_between_local_ranks();
  const bool leader = env.rank == 0;
  PluginCatalog& catalog = config.catalog();
  const Options& plugins = config.section("plugins");
  const std::string& comm_id = plugins.get_string("comm");
  std::unique_ptr<Communicator> comm = catalog.comm(comm_id).create(
      config.plugin_options(comm_id), comm_context(env, store, "train/", timeout));
  EngineOptions engine_options = EngineOptions::from_config(config);
  // Stage 0 needs a layout too (flat groups); it never shards, so one group per unit does.
  std::string shard_id = plugins.get_string("shard").empty() ? "shard_bucket" : plugins.get_string("shard");
  auto strategy = catalog.shard(shard_id).create(plugins.get_string("shard").empty()
                                                     ? Options("plugin." + shard_id, catalog.shard(shard_id).options(), {}, {})
                                                     : config.plugin_options(shard_id));
  const std::string& optim_id = plugins.get_string("optimizer");
  auto optimizer = catalog.optimizer(optim_id).create(config.plugin_options(optim_id));

  auto model = models::make_model(config);
  auto data = data::make_data(config, model->shape);
  std::vector<Unit*> units;
  for (auto& u : model->units) units.push_back(u.get());
  OffloadTiers tiers = make_offload_tiers(config, env, store, timeout);
  Engine engine(units, *comm, *strategy, *optimizer, engine_options, tiers.engine_tiers());

  const Options& run = config.section("run");
  const int64_t steps = run.get_int("steps");
  Schedule schedule{run.get_string("lr_schedule"), optimizer->base_lr(), run.get_int("warmup_steps"), steps,
                    run.get_double("min_lr_ratio")};
  const std::string out_dir = run.get_string("out_dir");
  if (leader) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) throw IoError("cannot create run.out_dir " + out_dir + ": " + ec.message());
    std::printf("zt train: %s\n  %d rank(s), %s, ZeRO stage %d, %s, %s, compute %s\n  data: %s\n",
                model->describe().c_str(), env.world, comm->describe().c_str(), engine_options.stage,
                shard_id.c_str(), optim_id.c_str(), config.section("precision").get_string("compute").c_str(),
                data->describe().c_str());
    if (!tiers.describe().empty()) std::printf("  offload: %s\n", tiers.describe().c_str());
    std::printf("  %s\n", blas_header_line(probe_blas()).c_str());
    std::fflush(stdout);
  }
  TrainReport report(leader ? out_dir + "/metrics.jsonl" : "", steps, run.get_int("log_every"));
  const at::ScalarType dtype = engine_options.compute_dtype;
  const int64_t accum = engine_options.grad_accum;
  const int64_t tokens_per_sample = model->shape.kind == "gpt" ? model->shape.seq_len : 1;
  const double tokens_per_step = static_cast<double>(data->micro_batch() * accum * env.world * tokens_per_sample);
  double total_seconds = 0, last_loss = 0;
  int64_t skipped = 0;
  for (int64_t step = 0; step < steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0;
    for (int micro = 0; micro < accum; ++micro) {
      data::Batch batch = data->get(step, micro, env.rank, env.world);
      at::Tensor input = batch.input.is_floating_point() ? batch.input.to(dtype) : batch.input;
      loss_sum += engine.forward_backward(
          input, [&](const at::Tensor& out) { return model->loss(out, batch.target); });
    }
    const double lr = schedule.lr(step);
    StepReport rep = engine.step(lr);
    // The loss of the global batch: the mean over ranks of each rank's mean.
    at::Tensor loss = at::tensor({loss_sum / accum}, at::kDouble);
    comm->all_reduce(loss, ReduceOp::kAvg)->wait();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total_seconds += seconds;
    last_loss = loss.item<double>();
    skipped += rep.skipped ? 1 : 0;
    StepMetrics m{step + 1, last_loss, lr, rep.loss_scale, rep.grad_norm, rep.skipped, seconds,
                  tokens_per_step / seconds};
    auto memory = gather_memory(*comm, measure_memory(engine.memory(), engine_options.stage));
    report.log(m, memory, comm->stats());
  }
  report.finish_progress();
  auto memory = gather_memory(*comm, measure_memory(engine.memory(), engine_options.stage));
  CommStats stats = comm->stats();
  comm.reset();
  if (!leader) return 0;

  const int64_t psi = engine.parameter_count();
  const bool low = dtype != at::kFloat;
  const int64_t theory =
      theory_model_state_bytes(engine_options.stage, psi, env.world, low, separate_master_share(config));
  std::printf("\nsummary: %lld steps (%lld skipped), final loss %.4f, %.0f tokens/s, %.2f s/step\n",
              static_cast<long long>(steps), static_cast<long long>(skipped), last_loss,
              tokens_per_step * steps / total_seconds, total_seconds / steps);
  std::printf("model states per rank (%lld parameters, stage %d, %d ranks), by where they live:\n",
              static_cast<long long>(psi), engine_options.stage, env.world);
  // Tier columns: one per distinct offload plugin; both roles may share one.
  std::vector<std::string> tier_ids;
  for (const auto& [id, tier] : tiers.by_id) tier_ids.push_back(id);
  auto tier_bytes = [&](const RankMemory& x, const std::string& id) {
    return (id == tiers.optimizer_id ? x.offload_optimizer : 0) + (id == tiers.param_id ? x.offload_param : 0);
  };
  std::printf("  %-5s %11s %11s %11s %11s %11s", "rank", "params", "grads", "master", "optim", "compute");
  for (const auto& id : tier_ids) std::printf(" %13s", id.c_str());
  std::printf(" %11s %11s %7s %11s\n", "total", "theory", "ratio", "peak RSS");
  for (size_t r = 0; r < memory.size(); ++r) {
    const auto& x = memory[r];
    std::printf("  %-5zu %11s %11s %11s %11s %11s", r, mib(x.params).c_str(), mib(x.grads).c_str(),
                mib(x.master).c_str(), mib(x.optimizer_states).c_str(), mib(x.model_states()).c_str());
    for (const auto& id : tier_ids) std::printf(" %13s", mib(tier_bytes(x, id)).c_str());
    std::printf(" %11s %11s %7.3f %11s\n", mib(x.total_model_states()).c_str(), mib(theory).c_str(),
                static_cast<double>(x.total_model_states()) / theory, mib(x.peak_rss).c_str());
  }
  if (!tier_ids.empty()) {
    std::printf("offload I/O (rank 0):");
    for (const auto& [id, tier] : tiers.by_id) {
      OffloadStats s = tier->stats();
      std::printf(" %s read %s in %lld requests, wrote %s in %lld, own buffers %s;", id.c_str(),
                  mib(static_cast<double>(s.bytes_read)).c_str(), static_cast<long long>(s.reads),
                  mib(static_cast<double>(s.bytes_written)).c_str(), static_cast<long long>(s.writes),
                  mib(static_cast<double>(s.staging_bytes)).c_str());
    }
    std::printf(" engine tile/fetch buffers %s\n", mib(static_cast<double>(memory[0].offload_staging)).c_str());
  }
  std::printf("collectives:");
  for (int i = 0; i < kNumCommOps; ++i) {
    std::printf(" %s %llu (%s)", comm_op_name(static_cast<CommOp>(i)),
                static_cast<unsigned long long>(stats.ops[i].calls), mib(stats.ops[i].bytes).c_str());
  }
  std::printf("\nmetrics: %s/metrics.jsonl\n", out_dir.c_str());
  return 0;
}

}  // namespace zt::trainer
