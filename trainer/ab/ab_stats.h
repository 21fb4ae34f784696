// The statistics of an A/B comparison: medians, percentiles and a bootstrap confidence interval
// for the ratio of two arms' median step times. Pure functions of their inputs (the bootstrap
// draws from a generator seeded by the caller, so a report is reproducible).
// Thread safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <vector>

namespace zt::trainer {

// The p-th percentile (0..100) with linear interpolation between order statistics; NaN when
// `values` is empty.
double percentile(std::vector<double> values, double p);
double median(const std::vector<double>& values);

struct RatioInterval {
  double ratio = 0;          // median(a) / median(b): > 1 when b's steps are shorter (b faster)
  double low = 0, high = 0;  // the 95% bootstrap interval of that ratio
};

// Resamples each arm with replacement `resamples` times and takes the 2.5th and 97.5th
// percentiles of median(a*) / median(b*). Throws InternalError when an arm is empty.
RatioInterval bootstrap_speedup(const std::vector<double>& a_step_s,
                                const std::vector<double>& b_step_s, int resamples, uint64_t seed);

}  // namespace zt::trainer
