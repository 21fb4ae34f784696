// Model-state bytes per rank that ZeRO theory predicts (docs/architecture.md, "Memory"), next to
// which the run summary and bench/train print what the engine measured. psi = parameters, N =
// ranks.
//   fp32 compute (the fp32 params are the master): stage 0: 16psi, 1: 4psi + 4psi + 8psi/N,
//                                                  2: 4psi + 12psi/N, 3: 16psi/N
//   bf16/fp16 compute (+ fp32 master):             stage 0: 16psi, 1: 2psi + 2psi + 12psi/N,
//                                                  2: 2psi + 14psi/N, 3: 16psi/N
#pragma once

#include <cstdint>

namespace zt::trainer {

// `separate_master` (fp32 only): the share of parameters whose fp32 master is its own copy
// because it, or the stage-3 parameter shard, was offloaded (the two can no longer be one
// buffer): + 4psi/N for that share, as in DeepSpeed's offload (stage 3: 20psi/N fully offloaded).
inline int64_t theory_model_state_bytes(int stage, int64_t psi, int world, bool low_precision,
                                        double separate_master = 0) {
  const double p = static_cast<double>(psi), n = world;
  double bytes;
  if (!low_precision) {
    switch (stage) {
      case 0: bytes = 16 * p; break;
      case 1: bytes = 8 * p + 8 * p / n; break;
      case 2: bytes = 4 * p + 12 * p / n; break;
      default: bytes = 16 * p / n; break;
    }
    if (stage >= 1) bytes += separate_master * 4 * p / n;
  } else {
    switch (stage) {
      case 0: bytes = 16 * p; break;
      case 1: bytes = 4 * p + 12 * p / n; break;
      case 2: bytes = 2 * p + 14 * p / n; break;
      default: bytes = 16 * p / n; break;
    }
  }
  return static_cast<int64_t>(bytes);
}

}  // namespace zt::trainer
