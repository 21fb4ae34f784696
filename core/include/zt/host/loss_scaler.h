// LossScaler: dynamic loss scaling for fp16 compute, with DeepSpeed's semantics. The loss is
// multiplied by scale() before backward; a step whose gradients overflowed anywhere is skipped
// on every rank; the first `hysteresis - 1` overflows since the scale last grew are tolerated,
// each later one backs the scale off; after `growth_interval` clean steps it grows (and the
// tolerance is refilled). Disabled (fp32, bf16), the scale is always 1.
// Thread safety: none; the engine calls it from the training thread only.
#pragma once

#include <cstdint>

#include "zt/api.h"

namespace zt {

struct LossScalerOptions {
  // 2^32: backs off to what the model needs in a few skipped steps. DeepSpeed's JSON default,
  // initial_scale_power 16 (2^16, torch.amp's GradScaler's too), is what its configs map to.
  double initial_scale = 4294967296.0;
  double min_scale = 1.0;           // backing off never goes below this
  double max_scale = 4294967296.0;  // growing never goes above this
  double growth_factor = 2.0;       // scale *= this after growth_interval clean steps
  double backoff_factor = 0.5;      // scale *= this on an overflow past the tolerance
  int64_t growth_interval = 1000;
  int64_t hysteresis = 2;
};

class ZT_API LossScaler {
 public:
  LossScaler(const LossScalerOptions& options, bool enabled);
  bool enabled() const { return enabled_; }
  double scale() const { return enabled_ ? scale_ : 1.0; }
  // Whether an overflow can no longer be scaled away: scaling is off, or the scale is at
  // min_scale (backing off leaves it there).
  bool at_floor() const { return !enabled_ || scale_ <= options_.min_scale; }
  // Records whether this step's gradients overflowed. Every rank must pass the same decision
  // (the engine all-reduces the overflow flag first), or the scales drift apart.
  void update(bool overflow);

  // What a checkpoint keeps so that a resumed run scales exactly as the saved one would have:
  // the scale (kept while disabled too: the configured initial one), the clean steps since the
  // last growth and the overflows still tolerated before backing off.
  double saved_scale() const { return scale_; }
  int64_t clean_steps() const { return clean_steps_; }
  int64_t hysteresis_left() const { return hysteresis_left_; }
  // Throws ConfigError for a scale that is not finite and > 0 or counts below 0 (a corrupt
  // checkpoint), naming the values.
  void restore(double scale, int64_t clean_steps, int64_t hysteresis_left);

 private:
  LossScalerOptions options_;
  bool enabled_;
  double scale_;
  int64_t clean_steps_ = 0;
  int64_t hysteresis_left_;
};

}  // namespace zt
