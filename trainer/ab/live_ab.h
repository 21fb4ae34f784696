// Live A/B inside one training job ([ab] arms, switch_every): the job trains arm A for
// switch_every steps, then B, then A again..., each arm a composition of the same job (another
// shard plugin, stage, buckets, prefetch, offload). At a switch the engine's whole state (fp32
// masters, optimizer states, step count, loss scaler) is saved as a checkpoint, the engine is
// rebuilt from the next arm's config over the same communicator, and the checkpoint is loaded
// into it, resharded for the new layout: no step is lost or repeated, and the loss curve is the
// one a single arm gives. Steps record their arm in metrics.jsonl, switches their cost; the
// A/B report (ab_report.h) is made from them at the end or by `trainer ab-report RUN_DIR`.
// Thread safety: the training thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ab/ab_arms.h"
#include "ab/ab_report.h"
#include "report/run_metrics.h"
#include "settings/job_settings.h"
#include "zt/host/plugin_loader.h"

namespace zt::trainer {

// Arms one live job may alternate between.
constexpr size_t kMaxLiveArms = 8;

struct LiveAb {
  std::vector<Arm> arms;              // named A, B, C, ...
  std::vector<JobSettings> settings;  // the job's with each arm's overrides applied
  int64_t switch_every = 0;
  std::string switch_dir;  // where the state passes through at a switch

  bool on() const { return arms.size() >= 2; }
  // The arm that trains optimizer step `step` (0-based).
  size_t arm_of_step(int64_t step) const {
    return static_cast<size_t>((step / switch_every) % static_cast<int64_t>(arms.size()));
  }

  // The live A/B of a job ([ab] arms). With two or more arms, every arm's settings are resolved
  // (the job's config with its overrides: JobSettings::with_overrides) and its plugins loaded
  // into `catalog`, the job's, which composes each arm (a missing one is a PluginError now,
  // before any rank starts), and arms that set a key that changes the math are refused with a
  // ConfigError naming the keys and the place. Fewer than two arms: live A/B is off (one arm is a
  // ConfigError: it has nothing to alternate with).
  static LiveAb of(const JobSettings& job, PluginCatalog& catalog);
};

// The A/B report of a live job from its metrics, of its two arms or of the two different ones
// named in `pick` (as its steps name them, "A" and "C": a job of more arms is compared two at a
// time; any other `pick` is an InternalError, the command line refuses it first; trainer
// tune reads each arm's steps itself): each arm's steps in blocks as they ran, the first
// `warmup` steps after each switch (and the job's first) left out of the timings. The losses are
// one curve, so nothing is compared across arms. Throws ConfigError when the metrics hold no
// arms (not a live A/B job) or only one, more than two and no `pick`, an arm `pick` names that
// none of its steps does, or when `warmup` < 1.
AbResult live_ab_result(const RunMetrics& metrics, int64_t warmup,
                        const std::vector<std::string>& pick = {});

}  // namespace zt::trainer
