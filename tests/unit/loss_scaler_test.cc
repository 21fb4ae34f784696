// The dynamic loss scaler's state machine (DeepSpeed semantics).
#include <doctest/doctest.h>

#include "zt/error.h"
#include "zt/host/loss_scaler.h"

TEST_CASE("disabled: the scale is 1 whatever happens") {
  zt::LossScaler s({}, false);
  s.update(true);
  CHECK(s.scale() == 1.0);
}

TEST_CASE(
    "hysteresis: as DeepSpeed's, tolerated overflows are refilled only when the scale grows") {
  zt::LossScalerOptions o;
  o.initial_scale = 1024;
  o.hysteresis = 2;
  o.backoff_factor = 0.5;
  o.min_scale = 128;
  o.growth_interval = 4;
  zt::LossScaler s(o, true);
  s.update(true);
  CHECK(s.scale() == 1024);  // first overflow tolerated
  s.update(true);
  CHECK(s.scale() == 512);
  s.update(true);  // the tolerance stays used up after a back-off (DeepSpeed: 1024 -> 256)
  CHECK(s.scale() == 256);
  // Overflows every other step: a clean step between them does not refill the tolerance (it
  // did, and such a run skipped half its steps at one scale for good).
  s.update(false);
  s.update(true);
  CHECK(s.scale() == 128);
  s.update(false);
  s.update(true);
  CHECK(s.scale() == 128);  // min_scale holds
  // growth_interval clean steps grow the scale and refill the tolerance.
  for (int i = 0; i < 4; ++i) s.update(false);
  CHECK(s.scale() == 256);
  CHECK(s.hysteresis_left() == 2);
  s.update(true);
  CHECK(s.scale() == 256);
  s.update(true);
  CHECK(s.scale() == 128);
}

TEST_CASE("hysteresis 1 backs off at every overflow") {
  zt::LossScalerOptions o;
  o.initial_scale = 64;
  o.hysteresis = 1;
  zt::LossScaler s(o, true);
  for (double expected : {32.0, 16.0, 8.0}) {
    s.update(true);
    CHECK(s.scale() == expected);
  }
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

TEST_CASE("restore: a scaler restored from another's state continues exactly as it would") {
  zt::LossScalerOptions o;
  o.initial_scale = 64;
  o.growth_interval = 3;
  o.hysteresis = 3;
  zt::LossScaler a(o, true);
  a.update(false);
  a.update(false);
  a.update(true);  // one overflow tolerated: hysteresis left 2, clean count restarted
  a.update(false);
  zt::LossScaler b(o, true);
  b.restore(a.saved_scale(), a.clean_steps(), a.hysteresis_left());
  for (bool overflow : {false, false, true, true, true, false, false, false}) {
    a.update(overflow);
    b.update(overflow);
    CHECK(b.scale() == a.scale());
    CHECK(b.clean_steps() == a.clean_steps());
    CHECK(b.hysteresis_left() == a.hysteresis_left());
  }
  CHECK(a.scale() != 64);  // the sequence moved the scale, so the comparison saw a change
}

TEST_CASE("restore: a damaged state is a ConfigError naming the values") {
  zt::LossScaler s({}, true);
  CHECK_THROWS_WITH_AS(s.restore(0, 0, 1), doctest::Contains("scale 0.0"), zt::ConfigError);
  CHECK_THROWS_AS(s.restore(1024, -1, 1), zt::ConfigError);
  CHECK(s.scale() == zt::LossScalerOptions{}.initial_scale);  // unchanged by a refused restore
}

TEST_CASE("restore: a state saved under other bounds starts within this run's") {
  // A bf16 run's checkpoint keeps its scaler's untouched first state (2^32, hysteresis 2); an
  // fp16 run resumed from it with max_scale 2^16 and hysteresis 1 scaled at 2^32 with two
  // overflows' grace.
  zt::LossScalerOptions o;
  o.initial_scale = 1024;
  o.max_scale = 65536;
  o.min_scale = 4;
  o.hysteresis = 1;
  o.growth_interval = 10;
  zt::LossScaler s(o, true);
  s.restore(4294967296.0, 25, 2);
  CHECK(s.scale() == 65536);
  CHECK(s.clean_steps() == 9);
  CHECK(s.hysteresis_left() == 1);
  s.update(true);  // no grace left: backs off at once
  CHECK(s.scale() == 32768);
  s.restore(1, 0, 1);
  CHECK(s.scale() == 4);
}
