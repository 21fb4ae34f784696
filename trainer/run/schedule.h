// Learning-rate schedules (run.lr_schedule): a warm-up (linear or logarithmic, from
// warmup_min_ratio x lr up to lr), then constant, cosine decay or linear decay to
// min_lr_ratio x lr over decay_steps (0: the run's steps).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "settings/job_settings.h"

namespace zt::trainer {

struct Schedule {
  std::string kind = "constant";  // "constant" | "cosine" | "linear"
  double base_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;  // where the decay ends (run.steps, or run.decay_steps)
  double min_lr_ratio = 0.1;
  std::string warmup_type = "linear";  // "linear" | "log"
  double warmup_min_ratio = 0;         // the warm-up starts at this fraction of base_lr

  // The lr of 0-based optimizer step `step`.
  double lr(int64_t step) const {
    if (warmup_steps > 0 && step < warmup_steps) {
      // Step warmup_steps - 1 reaches base_lr; log rises fast first, as DeepSpeed's "log" does.
      const double frac = warmup_type == "log" ? std::log(static_cast<double>(step + 2)) /
                                                     std::log(static_cast<double>(warmup_steps + 1))
                                               : static_cast<double>(step + 1) / warmup_steps;
      return base_lr * (warmup_min_ratio + (1 - warmup_min_ratio) * frac);
    }
    if (kind == "constant") return base_lr;
    int64_t decay = std::max<int64_t>(1, total_steps - warmup_steps);
    double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / decay);
    double floor = base_lr * min_lr_ratio;
    if (kind == "linear") return floor + (base_lr - floor) * (1.0 - progress);
    return floor + (base_lr - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }

  // A warning when the run of `run_steps` optimizer steps never reaches the schedule's peak or
  // its decay, else "". A warning, as DeepSpeed's WarmupDecayLR gives, not an error: a short
  // smoke run of a long job's config (--set run.steps=5) is meant.
  std::string note(int64_t run_steps) const {
    // Step warmup_steps - 1 (0-based) is the warm-up's last and trains at the peak.
    if (warmup_steps > run_steps) {
      return "run.warmup_steps = " + std::to_string(warmup_steps) +
             " is above run.steps = " + std::to_string(run_steps) +
             ": the whole run warms up and its lr stays below " +
             "the peak; lower run.warmup_steps to reach it";
    }
    // The decay of a run that ends it before the warm-up does is one step from the peak to the
    // floor; said where the run takes that step.
    if (kind != "constant" && warmup_steps >= total_steps && run_steps > warmup_steps + 1) {
      return "run.lr_schedule = \"" + kind + "\" decays after the warm-up, but run.warmup_steps " +
             "= " + std::to_string(warmup_steps) + " is not below the decay's end (" +
             std::to_string(total_steps) + ", run.decay_steps or run.steps): the lr falls " +
             "from the peak to run.min_lr_ratio x lr in one step, at step " +
             std::to_string(warmup_steps + 2) + ", and stays there; raise run.decay_steps above " +
             "run.warmup_steps for a gradual decay";
    }
    return "";
  }
};

// The schedule [run] configures around the optimizer's base lr.
inline Schedule schedule_of(const ScheduleSettings& s, double base_lr) {
  return Schedule{s.kind,         base_lr,       s.warmup_steps,    s.total_steps,
                  s.min_lr_ratio, s.warmup_type, s.warmup_min_ratio};
}

}  // namespace zt::trainer
