// Learning-rate schedules: constant, or linear warm-up then cosine decay (run.lr_schedule).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace zt::trainer {

struct Schedule {
  std::string kind = "constant";  // "constant" | "cosine"
  double base_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0.1;

  // The lr of 0-based optimizer step `step`.
  double lr(int64_t step) const {
    if (warmup_steps > 0 && step < warmup_steps) return base_lr * (step + 1) / warmup_steps;
    if (kind == "constant") return base_lr;
    int64_t decay = std::max<int64_t>(1, total_steps - warmup_steps);
    double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / decay);
    double floor = base_lr * min_lr_ratio;
    return floor + (base_lr - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
};

}  // namespace zt::trainer
