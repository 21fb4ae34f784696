// The dynamic loss scaler's state machine (see loss_scaler.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "zt/error.h"
#include "zt/host/loss_scaler.h"

namespace zt {

LossScaler::LossScaler(const LossScalerOptions& options, bool enabled)
    : options_(options),
      enabled_(enabled),
      scale_(options.initial_scale),
      hysteresis_left_(options.hysteresis) {}

void LossScaler::update(bool overflow) {
  if (!enabled_) return;
  // DeepSpeed's default (consecutive_hysteresis = false): `hysteresis - 1` overflows are
  // tolerated, counted since the scale last grew; once they are used up every overflow backs
  // off, until a growth refills them. Refilled on every clean step instead, overflows every
  // other step never backed off and half the steps were skipped for good.
  if (overflow) {
    clean_steps_ = 0;
    if (hysteresis_left_ > 1) {
      --hysteresis_left_;
    } else {
      scale_ = std::max(options_.min_scale, scale_ * options_.backoff_factor);
    }
    return;
  }
  if (++clean_steps_ >= options_.growth_interval) {
    scale_ = std::min(options_.max_scale, scale_ * options_.growth_factor);
    clean_steps_ = 0;
    hysteresis_left_ = options_.hysteresis;
  }
}

void LossScaler::restore(double scale, int64_t clean_steps, int64_t hysteresis_left) {
  if (!std::isfinite(scale) || scale <= 0 || clean_steps < 0 || hysteresis_left < 0) {
    throw ConfigError("loss scaler state from a checkpoint is invalid (scale " +
                      std::to_string(scale) + ", clean steps " + std::to_string(clean_steps) +
                      ", hysteresis left " + std::to_string(hysteresis_left) +
                      "): the checkpoint is damaged; resume from an older one");
  }
  // Within this run's bounds: a checkpoint saved under others (a bf16 run's untouched first
  // scale, resumed in fp16 with a lower max_scale or hysteresis) starts at the nearest state
  // they allow. Saved under the same settings, the state is within them and stays as it was.
  scale_ = std::clamp(scale, options_.min_scale, std::max(options_.min_scale, options_.max_scale));
  clean_steps_ = std::min(clean_steps, std::max<int64_t>(0, options_.growth_interval - 1));
  hysteresis_left_ = std::min(hysteresis_left, options_.hysteresis);
}

}  // namespace zt
