#include "ab/ab_stats.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "zt/error.h"

namespace zt::trainer {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const double at = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(at));
  const size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (at - static_cast<double>(below));
}

double median(const std::vector<double>& values) { return percentile(values, 50); }

namespace {

StepGroups non_empty(const StepGroups& groups) {
  StepGroups out;
  for (const auto& g : groups) {
    if (!g.empty()) out.push_back(g);
  }
  if (out.empty()) throw InternalError("bootstrap_speedup: an arm has no step times to compare");
  return out;
}

}  // namespace

std::vector<double> pooled(const StepGroups& groups) {
  std::vector<double> out;
  for (const auto& g : groups) out.insert(out.end(), g.begin(), g.end());
  return out;
}

RatioInterval bootstrap_speedup(const StepGroups& a_groups, const StepGroups& b_groups,
                                int resamples, uint64_t seed) {
  const StepGroups a = non_empty(a_groups), b = non_empty(b_groups);
  RatioInterval out;
  out.ratio = median(pooled(a)) / median(pooled(b));
  std::mt19937_64 gen(seed);
  std::vector<double> drawn;
  auto resample = [&](const StepGroups& groups) {
    std::uniform_int_distribution<size_t> pick_group(0, groups.size() - 1);
    drawn.clear();
    for (size_t k = 0; k < groups.size(); ++k) {
      const std::vector<double>& g = groups[pick_group(gen)];
      std::uniform_int_distribution<size_t> pick(0, g.size() - 1);
      for (size_t n = 0; n < g.size(); ++n) drawn.push_back(g[pick(gen)]);
    }
    return median(drawn);
  };
  std::vector<double> ratios(static_cast<size_t>(std::max(1, resamples)));
  for (double& r : ratios) {
    const double x = resample(a);
    r = x / resample(b);
  }
  out.low = percentile(ratios, 2.5);
  out.high = percentile(ratios, 97.5);
  return out;
}

}  // namespace zt::trainer
