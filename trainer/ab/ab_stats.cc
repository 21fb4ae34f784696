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

RatioInterval bootstrap_speedup(const std::vector<double>& a_step_s,
                                const std::vector<double>& b_step_s, int resamples, uint64_t seed) {
  if (a_step_s.empty() || b_step_s.empty()) {
    throw InternalError("bootstrap_speedup: an arm has no step times to compare");
  }
  RatioInterval out;
  out.ratio = median(a_step_s) / median(b_step_s);
  std::mt19937_64 gen(seed);
  auto resample = [&](const std::vector<double>& from) {
    std::uniform_int_distribution<size_t> pick(0, from.size() - 1);
    std::vector<double> drawn(from.size());
    for (double& v : drawn) v = from[pick(gen)];
    return median(drawn);
  };
  std::vector<double> ratios(static_cast<size_t>(std::max(1, resamples)));
  for (double& r : ratios) {
    const double a = resample(a_step_s);
    r = a / resample(b_step_s);
  }
  out.low = percentile(ratios, 2.5);
  out.high = percentile(ratios, 97.5);
  return out;
}

}  // namespace zt::trainer
