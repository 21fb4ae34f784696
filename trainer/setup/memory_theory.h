// Model-state bytes per rank: what ZeRO theory predicts (docs/architecture.md, "Memory"), next to
// which the run summary and bench/train print what the engine measured, and where the engine
// puts each array, which the memory-fit check (memory_fit.h) adds up per host tier. psi =
// parameters, N = ranks. With Adam's two fp32 states and an fp32 master:
//   fp32 compute (the fp32 params are the master): stage 0: 16psi, 1: 4psi + 4psi + 8psi/N,
//                                                  2: 4psi + 12psi/N, 3: 16psi/N
//   bf16/fp16 compute (+ fp32 master):             stage 0: 16psi, 1: 2psi + 2psi + 12psi/N,
//                                                  2: 2psi + 14psi/N, 3: 16psi/N
// bf16 states (state_dtype) halve the states' 8; a bf16 master (master_dtype) costs 2, and
// nothing where it is the bf16 parameters themselves.
#pragma once

#include <algorithm>
#include <cstdint>

namespace zt::trainer {

// The dtypes a theory counts in, bytes per element; the defaults are ZeRO's mixed-precision Adam.
struct TheoryDtypes {
  bool low_precision = false;      // bf16/fp16 compute: 2-byte parameters and gradients
  int64_t state_element_size = 4;  // each of the optimizer's states (bf16 states: 2)
  int64_t master_element_size = 4;
  int64_t states = 2;  // the optimizer's states per element: Adam's 2
};

// The sum of ZeRO's terms: parameters and gradients in the compute dtype (replicated below
// stages 3 and 2), and the master and states sharded from stage 1. A master in the compute
// dtype is the parameters themselves, except for `separate_master`: the share of parameters whose
// master is its own copy because it, or the stage-3 parameter shard, was offloaded (the two can
// no longer be one buffer), as in DeepSpeed's offload (fp32 stage 3 fully offloaded: 20psi/N).
inline int64_t theory_model_state_bytes(int stage, int64_t psi, int world, TheoryDtypes dtypes,
                                        double separate_master = 0) {
  const double p = static_cast<double>(psi), n = world;
  const double compute = dtypes.low_precision ? 2 : 4;
  const double master = static_cast<double>(dtypes.master_element_size);
  const double states = static_cast<double>(dtypes.states * dtypes.state_element_size);
  const double params = stage >= 3 ? compute * p / n : compute * p;
  const double grads = stage >= 2 ? compute * p / n : compute * p;
  const double sharded = stage >= 1 ? p / n : p;
  // A stage-0 master in the compute dtype is the replicated parameters: nothing to separate.
  const double own_master = master != compute ? 1 : stage >= 1 ? separate_master : 0;
  return static_cast<int64_t>(params + grads + (master * own_master + states) * sharded);
}

// How one rank's model states are placed, as the engine does it (shard_storage): the inputs of
// rank_state_bytes.
struct StatePlacement {
  int stage = 0;
  int64_t psi = 0;
  int world = 1;
  int64_t element_size = 4;         // the compute dtype's bytes
  int64_t optimizer_states = 2;     // arrays per element beside the master (Adam: 2)
  int64_t state_element_size = 4;   // bytes per element of each (bf16 states: 2)
  int64_t master_element_size = 4;  // bytes per element of the master (bf16 masters: 2)
  // Compute in the master's dtype: the share of parameters whose master is its own copy
  // (zt/host/compose.h's separate_master_share); other compute dtypes always have one.
  double separate_master = 0;
  double optimizer_in_files = 0;  // share of master + states in a file tier (offload fraction)
  double params_in_files = 0;     // stage 3: share of parameter shards in a file tier
  bool grads_in_files = false;    // the gradient shards follow the optimizer states to files
};

// Bytes of one rank's model states by array and place. Unlike the theory above this is the
// engine's own account: its reduced gradient shard is fp32 whatever the compute dtype, and the
// transient .grad tensors autograd fills are not model states (the fit check counts them with
// the working set). Host tiers (offload_cpu) are host memory, so only files leave the host.
struct StateBytes {
  int64_t params = 0, master = 0, states = 0, grads = 0;  // in host memory
  int64_t optimizer_files = 0;  // master + states (+ gradient shards) in the optimizer's tier
  int64_t param_files = 0;      // stage 3 parameter shards in the parameters' tier
  int64_t host() const { return params + master + states + grads; }
  int64_t files() const { return optimizer_files + param_files; }
};

inline StateBytes rank_state_bytes(const StatePlacement& p) {
  const double psi = static_cast<double>(p.psi);
  // What a rank owns of each group: stage 0 keeps everything.
  const double shard = p.stage >= 1 ? psi / p.world : psi;
  const double es = static_cast<double>(p.element_size);
  const double opt_files = p.stage >= 1 ? p.optimizer_in_files : 0;
  const double param_files = p.stage == 3 ? p.params_in_files : 0;
  const double grad_files = p.grads_in_files ? opt_files : 0;
  // A master in a tier is always its own copy; in the master's dtype the others are the
  // parameters.
  const double own_master = p.element_size == p.master_element_size
                                ? std::max(p.separate_master, opt_files)
                                : 1;
  const auto master_es = static_cast<double>(p.master_element_size);
  StateBytes b;
  b.params = static_cast<int64_t>(p.stage < 3 ? es * psi : es * shard * (1 - param_files));
  b.master = static_cast<int64_t>(master_es * shard * (own_master - opt_files));
  const double state_bytes = static_cast<double>(p.optimizer_states * p.state_element_size);
  b.states = static_cast<int64_t>(state_bytes * shard * (1 - opt_files));
  b.grads = static_cast<int64_t>(4 * shard * (1 - grad_files));
  b.optimizer_files = static_cast<int64_t>((master_es + state_bytes) * shard * opt_files +
                                           4 * shard * grad_files);
  b.param_files = static_cast<int64_t>(es * shard * param_files);
  return b;
}

}  // namespace zt::trainer
