// Learning-rate schedules (run.lr_schedule and its warm-up), including the forms DeepSpeed's
// WarmupLR, WarmupDecayLR and WarmupCosineLR map onto.
#include <doctest/doctest.h>

#include <cmath>

#include "run/schedule.h"

using zt::trainer::Schedule;

TEST_CASE("warm-up: linear from 0 as before, from a floor, and logarithmic") {
  Schedule s{"constant", 1.0, 4, 10, 0.1};
  CHECK(s.lr(0) == doctest::Approx(0.25));
  CHECK(s.lr(3) == doctest::Approx(1.0));
  CHECK(s.lr(9) == 1.0);
  s.warmup_min_ratio = 0.2;
  CHECK(s.lr(0) == doctest::Approx(0.2 + 0.8 * 0.25));
  s.warmup_type = "log";
  s.warmup_min_ratio = 0;
  CHECK(s.lr(0) == doctest::Approx(std::log(2.0) / std::log(5.0)));
  CHECK(s.lr(1) > 0.5);  // rises fast first, unlike linear (0.5)
  CHECK(s.lr(3) == doctest::Approx(1.0));
}

TEST_CASE("decay after the warm-up: cosine and linear to min_lr_ratio at total_steps") {
  Schedule cosine{"cosine", 2.0, 2, 12, 0.1};
  CHECK(cosine.lr(2) == doctest::Approx(2.0));
  CHECK(cosine.lr(7) == doctest::Approx(0.2 + 1.8 * 0.5));
  CHECK(cosine.lr(12) == doctest::Approx(0.2));
  Schedule linear{"linear", 2.0, 2, 12, 0.0};
  CHECK(linear.lr(2) == doctest::Approx(2.0));
  CHECK(linear.lr(7) == doctest::Approx(1.0));
  CHECK(linear.lr(12) == doctest::Approx(0.0));
  CHECK(linear.lr(20) == doctest::Approx(0.0));
}

TEST_CASE("a warm-up the run never finishes, or a decay it never starts, is said") {
  Schedule fits{"cosine", 1.0, 10, 100, 0.1};
  CHECK(fits.note(100).empty());
  CHECK(Schedule{"constant", 1.0, 0, 1, 0.1}.note(1).empty());
  CHECK(Schedule{"constant", 1.0, 1, 1, 0.1}.note(1).empty());  // one step: at the peak already
  const std::string longer = Schedule{"constant", 1.0, 100, 5, 0.1}.note(5);
  CHECK(longer.find("run.warmup_steps = 100 is above run.steps = 5") != std::string::npos);
  // A warm-up as long as the run reaches the peak at its last step.
  const Schedule whole{"constant", 1.0, 2, 2, 0.1};
  CHECK(whole.note(2).empty());
  CHECK(whole.lr(1) == 1.0);
  // decay_steps ends the decay before the warm-up does; the run itself is long enough: the lr
  // falls to the floor in one step, at step 22 (1-based), which the note says.
  const Schedule cliff{"linear", 1.0, 20, 10, 0.1};
  const std::string falls = cliff.note(50);
  CHECK(falls.find("the lr falls from the peak to run.min_lr_ratio x lr in one step, at step 22") !=
        std::string::npos);
  CHECK(cliff.lr(20) == 1.0);
  CHECK(cliff.lr(21) == doctest::Approx(0.1));
  CHECK(cliff.note(21).empty());  // the run ends at the peak: it never takes that step
  CHECK(Schedule{"constant", 1.0, 20, 10, 0.1}.note(50).empty());
}
