// The dynamic loss scaler's state machine (DeepSpeed semantics).
#include <doctest/doctest.h>

#include "zt/loss_scaler.h"

TEST_CASE("disabled: the scale is 1 whatever happens") {
  zt::LossScaler s({}, false);
  s.update(true);
  CHECK(s.scale() == 1.0);
}

TEST_CASE("hysteresis: back off only after that many overflows in a row, never below min_scale") {
  zt::LossScalerOptions o;
  o.initial_scale = 1024;
  o.hysteresis = 2;
  o.backoff_factor = 0.5;
  o.min_scale = 256;
  zt::LossScaler s(o, true);
  s.update(true);
  CHECK(s.scale() == 1024);  // first overflow tolerated
  s.update(true);
  CHECK(s.scale() == 512);
  s.update(false);  // a clean step resets the tolerance
  s.update(true);
  CHECK(s.scale() == 512);
  s.update(true);
  CHECK(s.scale() == 256);
  s.update(true);
  s.update(true);
  CHECK(s.scale() == 256);  // min_scale holds
}

TEST_CASE("growth after growth_interval clean steps, capped at max_scale") {
  zt::LossScalerOptions o;
  o.initial_scale = 8;
  o.growth_interval = 3;
  o.growth_factor = 2;
  o.max_scale = 32;
  zt::LossScaler s(o, true);
  for (int i = 0; i < 2; ++i) s.update(false);
  CHECK(s.scale() == 8);
  s.update(false);
  CHECK(s.scale() == 16);
  for (int i = 0; i < 9; ++i) s.update(false);
  CHECK(s.scale() == 32);
  s.update(true);  // an overflow restarts the clean count
  s.update(true);
  CHECK(s.scale() == 16);
  s.update(false);
  s.update(false);
  CHECK(s.scale() == 16);
}
