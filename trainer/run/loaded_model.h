// A model whose engine holds a checkpoint's parameters, for `trainer eval` and `trainer sample`,
// and the steps of setting up a model's ranks that training shares with them.
// Thread safety: the training thread only; the collective functions are called by every rank at
// the same point.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "run/evaluation.h"
#include "settings/job_settings.h"
#include "zt/host/checkpoint.h"
#include "zt/host/compose.h"
#include "zt/host/rendezvous.h"
#include "zt/model_source.h"
#include "zt/store.h"

namespace zt::trainer {

// Ranks of one host share its cores: LibTorch's default (all cores per process) oversubscribes
// them, which made a 2-rank job several times slower here. The cores are the CPUs this process
// may run on (its affinity mask), capped by SLURM_CPUS_PER_TASK.
void share_cores_between_local_ranks();

// A model's buffers (masks, running statistics) as rank 0 holds them, on every rank, floating
// ones in the compute dtype (as module.to(dtype) casts them, so a bf16 unit meets bf16 buffers):
// they are not parameters, so the engine neither shards, casts nor syncs them. Collective; does
// nothing for the built-in models, which have none.
void broadcast_model_buffers(const models::ModelShape& shape, Composition& composition);
// The same for any module's buffers (the Python engine's nn.Module): each floating one in the
// compute dtype, then rank 0's values. Collective.
void broadcast_buffers(const std::vector<at::Tensor>& buffers, Composition& composition);
// A note (one line, "" when none) naming the model's floating buffers, which checkpoints do not
// hold: loaded from one, they keep the model file's values.
std::string unsaved_buffers_note(const models::ModelShape& shape);

// Members in build order: the engine (in setup) goes first, then the source whose units it owns.
struct LoadedModel {
  std::unique_ptr<models::Model> model;  // shape, loss and description
  std::unique_ptr<ModelSource> source;
  Composition setup;
  OwnForward own_forward;  // a TorchScript module that is not a chain of its units: its forward
};

// The job's model built as training builds it (partitioned, with the job's stage, strategy,
// offload and plugins, at this world size), then `reader`'s state loaded into it, whatever world
// size and composition saved it. Collective. Throws what building the engine and
// Engine::load_checkpoint throw (a checkpoint of another model: ConfigError naming the tensor).
LoadedModel load_checkpointed_model(const JobSettings& job, PluginCatalog& catalog,
                                    const RankEnv& env, Store& store,
                                    std::chrono::milliseconds timeout,
                                    const CheckpointReader& reader);

}  // namespace zt::trainer
