// The dynamic loss scaler's state machine (see loss_scaler.h).
#include <algorithm>

#include "zt/loss_scaler.h"

namespace zt {

LossScaler::LossScaler(const LossScalerOptions& options, bool enabled)
    : options_(options),
      enabled_(enabled),
      scale_(options.initial_scale),
      hysteresis_left_(options.hysteresis) {}

void LossScaler::update(bool overflow) {
  if (!enabled_) return;
  if (overflow) {
    clean_steps_ = 0;
    // Tolerate `hysteresis - 1` overflows in a row before backing off, as DeepSpeed does.
    if (--hysteresis_left_ <= 0) {
      scale_ = std::max(options_.min_scale, scale_ * options_.backoff_factor);
      hysteresis_left_ = options_.hysteresis;
    }
    return;
  }
  hysteresis_left_ = options_.hysteresis;
  if (++clean_steps_ >= options_.growth_interval) {
    scale_ = std::min(options_.max_scale, scale_ * options_.growth_factor);
    clean_steps_ = 0;
  }
}

}  // namespace zt
