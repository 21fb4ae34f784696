// The race of `trainer tune`: candidates run in rounds, each round's step times pooled with the
// earlier rounds', and after each round the ones that are clearly slower than the leader leave
// (the 95% bootstrap interval of their median step time over the leader's lies above 1 +
// margin), then successive halving: of more than two still racing, the slower half by median
// leaves. The leader is the lowest median. Pure: the caller runs the rounds.
// Thread safety: free functions of their inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ab/ab_stats.h"

namespace zt::trainer {

struct Contender {
  size_t candidate = 0;       // index into the caller's candidates
  StepGroups step_groups;     // its timed steps, per trial job (the bootstrap resamples jobs first)
  std::vector<int64_t> jobs;  // the trial job of each group (judge_round compares within one)
  bool racing = true;
  std::string left;  // why it left the race ("" while racing)
  int left_round = 0;
  RatioInterval vs_leader;  // its median over the leader's at its last judgement (1 = leader)
  std::vector<double> step_s() const;  // every timed step so far, pooled over its jobs
  bool timed() const;                  // any step timed yet
  double median_s() const;
};

struct RaceRules {
  double clear_margin = 0.02;  // slower by more than this (interval's low end) = clearly slower
  int resamples = 2000;
  uint64_t seed = 1;
  bool halve = true;  // successive halving after the clearly-slower rule
};

// Judges a round (`round`, 1-based, named `when` in the reasons: "phase 1 round 2"): updates
// vs_leader of every racing contender with steps, makes the clearly slower and (halving) the slower
// half leave, and returns the leader's index into `contenders`. Contenders without steps are left
// as they are. Throws InternalError when no racing contender has steps.
size_t judge_round(std::vector<Contender>& contenders, int round, const std::string& when,
                   const RaceRules& rules);

// The racing contender of lowest median step time (index into `contenders`).
size_t race_leader(const std::vector<Contender>& contenders);

}  // namespace zt::trainer
