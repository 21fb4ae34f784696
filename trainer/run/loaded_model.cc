#include "run/loaded_model.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "models/torchscript.h"
#include "run/checkpointing.h"
#include "settings/job_settings.h"
#include "zt/host/process_cpus.h"
#include "zt/host/rendezvous.h"

namespace zt::trainer {

void share_cores_between_local_ranks() {
  // Slurm's --cpus-per-task is what the user gave each rank, as far as the rank may run on that
  // many CPUs; otherwise the CPUs this process was given are shared by the ranks the launcher
  // put on the host (zt's launcher inside one Slurm task shares that task's CPUs: 64 threads on
  // 8 given CPUs ran 8 ranks at a crawl).
  const RankEnv env = discover_rank_env();
  const char* per_task = std::getenv("SLURM_CPUS_PER_TASK");
  const int slurm_cpus = per_task ? std::atoi(per_task) : 0;
  int cores = cpus_this_process_may_use();
  if (slurm_cpus > 0 && env.source == "slurm") {
    if (cores < slurm_cpus && env.local_rank == 0) {
      // srun of Slurm 22.05 to 23.02 does not take --cpus-per-task from sbatch: where tasks are
      // bound, each gets one CPU, and 16 threads on it ran the step many times slower.
      std::fprintf(stderr,
                   "zt: warning: SLURM_CPUS_PER_TASK=%d, but this rank may run on %d CPU(s) "
                   "(its affinity mask), so it runs %d thread(s); srun of Slurm 22.05-23.02 "
                   "does not take --cpus-per-task from sbatch: give srun --cpus-per-task="
                   "$SLURM_CPUS_PER_TASK (or export SRUN_CPUS_PER_TASK)\n",
                   slurm_cpus, cores, cores);
    }
    at::set_num_threads(std::min(cores, slurm_cpus));
    return;
  }
  if (slurm_cpus > 0) cores = std::min(cores, slurm_cpus);
  const int local_ranks = std::max(1, env.local_world);
  at::set_num_threads(std::max(1, cores / local_ranks));
}

void broadcast_buffers(const std::vector<at::Tensor>& buffers, Composition& setup) {
  const EngineOptions& o = setup.options;
  c10::NoGradGuard no_grad;
  for (at::Tensor buffer : buffers) {
    // Where the engine computes: a floating buffer in its compute dtype, every one on its device.
    const at::Tensor placed = buffer.is_floating_point() ? buffer.to(o.device, o.compute_dtype)
                                                         : buffer.to(o.device);
    if (!placed.is_same(buffer)) buffer.set_data(placed);
    if (buffer.numel() == 0) continue;  // nothing to send
    at::Tensor flat = buffer.contiguous();
    broadcast_host(*setup.comm, flat, 0);
    if (!flat.is_same(buffer)) buffer.copy_(flat);
  }
}

void broadcast_model_buffers(const models::ModelShape& shape, Composition& setup) {
  if (!shape.custom) return;
  std::vector<at::Tensor> buffers;
  for (auto& [name, buffer] : shape.custom->buffers()) buffers.push_back(buffer);
  broadcast_buffers(buffers, setup);
}

std::string unsaved_buffers_note(const models::ModelShape& shape) {
  if (!shape.custom) return "";
  std::string names;
  int64_t count = 0;
  for (auto& [name, buffer] : shape.custom->buffers()) {
    if (!buffer.is_floating_point() || buffer.numel() == 0) continue;
    if (++count <= 3) names += (names.empty() ? "" : ", ") + name;
  }
  if (count == 0) return "";
  return "  note: checkpoints do not hold the model's " + std::to_string(count) +
         " floating buffer(s) (" + names + (count > 3 ? ", ..." : "") +
         "): they start from the model file's values, as a BatchNorm's running statistics "
         "would\n";
}

LoadedModel load_checkpointed_model(const JobSettings& job, PluginCatalog& catalog,
                                    const RankEnv& env, Store& store,
                                    std::chrono::milliseconds timeout,
                                    const CheckpointReader& reader) {
  check_same_model(reader.meta().config_toml, job.config_toml, reader.folder());
  LoadedModel loaded;
  loaded.model = std::make_unique<models::Model>();
  loaded.model->shape = models::resolve_model_shape(job.model, catalog);
  loaded.model->seed = job.run.seed;
  loaded.source = models::make_model_source(loaded.model->shape, loaded.model->seed);
  if (loaded.model->shape.custom) {
    // As training checks it: whether the units are a chain, else the module's own forward; on
    // synthetic samples of the model's input, so sampling needs no data file.
    DataSettings samples = job.data;
    samples.kind = "synthetic";
    const auto data = data::make_data(samples, models::model_inputs(loaded.model->shape),
                                      loaded.model->shape.kind);
    loaded.own_forward = models::check_first_batch(*loaded.model->shape.custom, *data,
                                                   job.engine.options.stage,
                                                   /*real_data=*/false);
  }
  loaded.setup = compose(job.engine, catalog, env, store, timeout, *loaded.source);
  // The checkpoint replaces every value: the file's initial copies can go.
  if (loaded.model->shape.custom) models::release_initial_values(*loaded.model->shape.custom);
  broadcast_model_buffers(loaded.model->shape, loaded.setup);
  loaded.setup.engine->load_checkpoint(reader);
  return loaded;
}

}  // namespace zt::trainer
