#include "run/token_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace zt::trainer {

namespace {

// splitmix64's finaliser: nearby inputs get unrelated outputs.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

double sampling_uniform(uint64_t seed, int64_t sample, int64_t position) {
  const uint64_t z = mix64(mix64(seed ^ 0x5a6d706c65ULL) ^ mix64(static_cast<uint64_t>(sample)) ^
                           (static_cast<uint64_t>(position) * 0x9e3779b97f4a7c15ULL));
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int64_t next_token(const std::vector<double>& logits, const SamplingSettings& settings,
                   int64_t sample, int64_t position) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (settings.temperature <= 0) {
    return std::max_element(logits.begin(), logits.end()) - logits.begin();
  }
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const int64_t keep = settings.top_k > 0 ? std::min(settings.top_k, vocab) : vocab;
  // Highest first, the lower id first on a tie: the same cut however the logits were ordered.
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const double top = logits[order[0]];
  std::vector<double> weights(static_cast<size_t>(keep));
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) {
    weights[i] = std::exp((logits[order[i]] - top) / settings.temperature);
    total += weights[i];
  }
  const double u = sampling_uniform(settings.seed, sample, position) * total;
  double cumulative = 0;
  for (int64_t i = 0; i < keep; ++i) {
    cumulative += weights[i];
    if (u < cumulative) return order[i];
  }
  // u within rounding of the total: the last id that has a weight (an id whose logit is -inf,
  // no token, has none).
  for (int64_t i = keep - 1; i > 0; --i) {
    if (weights[i] > 0) return order[i];
  }
  return order[0];
}

}  // namespace zt::trainer
