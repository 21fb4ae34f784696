#include "tune/race.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "zt/error.h"

namespace zt::trainer {

std::vector<double> Contender::step_s() const { return pooled(step_groups); }

bool Contender::timed() const {
  return std::any_of(step_groups.begin(), step_groups.end(),
                     [](const std::vector<double>& g) { return !g.empty(); });
}

double Contender::median_s() const {
  return timed() ? median(step_s()) : std::numeric_limits<double>::infinity();
}

size_t race_leader(const std::vector<Contender>& contenders) {
  size_t best = contenders.size();
  for (size_t i = 0; i < contenders.size(); ++i) {
    const Contender& c = contenders[i];
    if (!c.racing || !c.timed()) continue;
    if (best == contenders.size() || c.median_s() < contenders[best].median_s()) best = i;
  }
  if (best == contenders.size()) throw InternalError("tune: no racing candidate has a timed step");
  return best;
}

size_t judge_round(std::vector<Contender>& contenders, int round, const std::string& when,
                   const RaceRules& rules) {
  const size_t leader = race_leader(contenders);
  const Contender& lead = contenders[leader];
  std::vector<size_t> racing;
  for (size_t i = 0; i < contenders.size(); ++i) {
    Contender& c = contenders[i];
    if (!c.racing || !c.timed()) continue;
    racing.push_back(i);
    if (i == leader) {
      c.vs_leader = {1, 1, 1};
      continue;
    }
    // > 1: the leader's steps are shorter.
    c.vs_leader = bootstrap_speedup(c.step_groups, lead.step_groups, rules.resamples,
                                    rules.seed + static_cast<uint64_t>(round * 1000 + i));
  }
  // An interval over one job each holds only the steps' noise, not the offset between two
  // processes (ab_stats.h): "clearly slower" needs the two timed in one job, or in two jobs
  // each. Halving below still ranks by the medians.
  const auto comparable = [&](const Contender& c) {
    const bool both_repeated = c.step_groups.size() >= 2 && lead.step_groups.size() >= 2;
    const bool one_job = !c.jobs.empty() && !lead.jobs.empty() && c.jobs.back() == lead.jobs.back();
    return both_repeated || one_job;
  };
  char why[200];
  for (size_t i : racing) {
    Contender& c = contenders[i];
    if (i == leader || c.vs_leader.low <= 1 + rules.clear_margin || !comparable(c)) continue;
    std::snprintf(why, sizeof(why),
                  "clearly slower after %s: %.2fx the leader's step time (95%% CI %.2f-%.2f)",
                  when.c_str(), c.vs_leader.ratio, c.vs_leader.low, c.vs_leader.high);
    c.racing = false;
    c.left = why;
    c.left_round = round;
  }
  std::vector<size_t> still;
  for (size_t i : racing) {
    if (contenders[i].racing) still.push_back(i);
  }
  if (rules.halve && still.size() > 2) {
    std::stable_sort(still.begin(), still.end(), [&](size_t a, size_t b) {
      return contenders[a].median_s() < contenders[b].median_s();
    });
    for (size_t k = (still.size() + 1) / 2; k < still.size(); ++k) {
      Contender& c = contenders[still[k]];
      std::snprintf(why, sizeof(why),
                    "in the slower half after %s: %.2fx the leader's step time (95%% CI "
                    "%.2f-%.2f)",
                    when.c_str(), c.vs_leader.ratio, c.vs_leader.low, c.vs_leader.high);
      c.racing = false;
      c.left = why;
      c.left_round = round;
    }
  }
  return leader;
}

}  // namespace zt::trainer
