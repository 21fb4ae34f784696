// The Engine's value types (zt/host/engine.h): its options, where offloaded states live, and what a
// step, the memory and the clock report. Apart from the facade, so the engine's parts and the
// code that only configures or reads an engine need not include the Engine class.
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "zt/codec.h"
#include "zt/host/loss_scaler.h"
#include "zt/offload.h"

namespace zt {

struct EngineOptions {
  int stage = 0;
  // Where the units' parameters, the flat parameter and gradient buffers and the shards held in
  // compute memory live. Every communicator the engine is given must move tensors of this device
  // (Communicator::device()); the engine refuses one that does not. EngineSettings leave it on
  // the CPU: launch.device = "cuda" reaches only the offload tiers so far.
  c10::Device device{c10::kCPU};
  at::ScalarType compute_dtype = at::kFloat;
  int64_t grad_accum = 1;
  double reduce_bucket_mb = 25;  // bound on gradient bytes in flight (stages 2-3)
  bool overlap_comm = true;
  double allgather_bucket_mb = 25;  // bound on parameter all-gathers in flight after a step
  int64_t prefetch_units = 1;       // stage 3: units gathered ahead of the running one
  int64_t prefetch_elements = 0;    // stage 3: if > 0, prefetch by element count instead
  int64_t max_live_parameters = 1000000000;      // stage 3: no prefetch past this many elements
  int64_t param_persistence_threshold = 100000;  // stage 3: groups of only smaller tensors stay
  double gradient_predivide_factor = 1.0;
  double gradient_clipping = 0.0;  // max global gradient norm; 0 = off
  // Name patterns of the parameters weight decay leaves alone (zero.no_weight_decay), and where
  // they were set ("job.toml:12:1"), for the warning of a pattern that matches nothing.
  std::vector<std::string> no_weight_decay;
  std::string no_weight_decay_place;
  bool dynamic_loss_scale = false;  // the trainer turns it on for fp16; skips overflowed steps
  bool activation_checkpointing = false;    // recompute each unit in backward: activation memory of
                                            // the unit inputs only, for about one more forward
  double offload_optimizer_fraction = 1.0;  // share of master + optimizer-state bytes offloaded
  double offload_param_fraction = 1.0;      // stage 3: share of parameter-shard bytes offloaded
  int64_t sub_group_size = 1000000000;      // elements per streamed tile
  bool pipeline_read = true;                // read tile i+1 while tile i is updated
  bool pipeline_write = true;               // write tile i-1 back while tile i is updated
  // With clipping or loss scaling (the update waits for the global norm): a group streamed from
  // a file tier keeps its reduced gradient there (true) or in host memory (false, the default,
  // as DeepSpeed's offload keeps gradients on the host): no disk traffic for it.
  bool gradients_in_tier = false;
  // MiCS / hpZ (stages 1-3): shard states over groups of this many consecutive ranks and
  // replicate them across the world / size groups; gradients are reduce-scattered in the group,
  // then each shard is all-reduced across the groups. 0 = every rank (flat ZeRO). Must divide
  // the world size.
  int shard_group_size = 0;
  bool hierarchical_params_gather = false;  // groups spanning hosts gather in two levels
  int ranks_per_host = 0;                   // consecutive ranks per host; 0 = unknown
  // With a gradient codec (EngineCodecs): keep each group's encoding error, fp32, and add it to
  // the next step's gradients before they are encoded.
  bool codec_error_feedback = false;
  LossScalerOptions scaler;
};

// Whether a step needs the global gradient norm before its first update (clipping, loss
// scaling): then no group is updated in backward, and a group streamed from a file tier keeps
// its reduced gradient in host memory unless gradients_in_tier (the engine's shard storage, the
// memory-fit check and the estimate all decide by these).
inline bool waits_for_gradient_norm(const EngineOptions& o) {
  return o.gradient_clipping > 0 || o.dynamic_loss_scale;
}
inline bool streamed_gradients_in_memory(const EngineOptions& o) {
  return waits_for_gradient_norm(o) && !o.gradients_in_tier;
}

// The codecs collectives run through (zt/codec.h); null = exact. Not owned (they must outlive
// the engine).
struct EngineCodecs {
  const Codec* weights = nullptr;    // stage 3's parameter all-gathers
  const Codec* gradients = nullptr;  // gradient reduce-scatters (stages 1-3), all-to-all
  // MiCS: the all-reduce of gradient shards across the groups (a coded reduce-scatter, then a
  // coded all-gather); null = exact.
  const Codec* gradients_across = nullptr;
};

// Where offloaded model states live; null = compute memory. Not owned (they must outlive the
// engine); one tier may serve both roles.
struct EngineTiers {
  OffloadTier* optimizer = nullptr;  // fp32 master weights and optimizer states (stages 1-3)
  OffloadTier* param = nullptr;      // parameter shards (stage 3)
};

struct StepReport {
  int64_t step = 0;       // optimizer steps applied so far
  bool skipped = false;   // overflow: no update on any rank
  double grad_norm = 0;   // global norm of the averaged gradients, before clipping
  double loss_scale = 1;  // the scale used for this step's gradients
};

// Bytes this rank owns, by category (what the engine allocated, not process RSS).
struct MemoryReport {
  int64_t params_gathered = 0;       // compute-dtype flat buffers currently materialised
  int64_t params_gathered_peak = 0;  // highest params_gathered since the engine was built
  int64_t params_shard = 0;          // stage 3: compute-dtype shards kept between gathers
  int64_t master_params = 0;         // fp32 master weights (owned shards)
  int64_t optimizer_states = 0;
  int64_t grads = 0;              // reduced fp32 gradient shards
  int64_t persistent_params = 0;  // stage 3: bytes of groups that never release
  int64_t unit_max_params = 0;    // largest single unit's gathered bytes
  // Offloaded bytes (not in the categories above, which count compute memory only).
  int64_t offload_optimizer = 0;     // master weights + optimizer states in the optimizer tier
  int64_t offload_param = 0;         // parameter shards in the param tier
  int64_t offload_staging = 0;       // host buffers streaming tiles and fetched shards use now
  int64_t offload_grads = 0;         // reduced fp32 gradient shards kept in the optimizer tier
  int64_t offload_staging_peak = 0;  // highest offload_staging since the engine was built
  int64_t codec_residuals = 0;       // the gradient codec's error feedback: fp32, padded model
};

// Where this rank's time went, in seconds summed since the engine was built: the waits are the
// parts of forward_backward() and step() spent blocked on collectives or on tier I/O, so a
// step's time splits into compute and those waits.
struct EngineTimes {
  double forward_backward = 0;  // forward_backward() as a whole
  double step = 0;              // step() as a whole
  double optimizer = 0;         // the optimizer's update of shards and tiles
  double comm_wait = 0;         // waiting for gathers, reduce-scatters and all-reduces
  double read_wait = 0;         // waiting for tier reads (parameter shards, state tiles, grads)
  double write_wait = 0;        // waiting for tier writes
};

}  // namespace zt
