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

// An arm's timed steps in groups that are independent of each other (runs, live A/B blocks,
// trial jobs), while the steps of one group are not: a process start, its core placement or the
// page cache shift a whole run.
using StepGroups = std::vector<std::vector<double>>;

// Every group's steps in one vector, in order.
std::vector<double> pooled(const StepGroups& groups);

// Resamples each arm `resamples` times in two levels (its groups with replacement, then each
// drawn group's steps with replacement) and takes the 2.5th and 97.5th percentiles of
// median(a*) / median(b*); the ratio itself is of the pooled medians. Resampling the pooled
// steps alone treated every step as independent: with 2% between runs and 0.5% within, an A/A
// comparison of 4 runs x 10 steps an arm named a winner 46% of the time (8% in two levels).
// With one group an arm's interval holds only its step-to-step noise. Empty groups are left
// out; throws InternalError when an arm has no step.
RatioInterval bootstrap_speedup(const StepGroups& a, const StepGroups& b, int resamples,
                                uint64_t seed);

}  // namespace zt::trainer
