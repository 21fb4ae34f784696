#include "zt/host/did_you_mean.h"

#include <algorithm>

namespace zt {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t threshold = std::max<size_t>(2, word.size() / 3);
  std::string best;
  size_t best_distance = threshold + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    // A candidate containing the word (or contained in it) is a likely abbreviation: accept it
    // at the threshold, so a genuine near miss still wins.
    if (d > threshold && !word.empty() &&
        (c.find(word) != std::string::npos || word.find(c) != std::string::npos)) {
      d = threshold;
    }
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best = closest_match(word, candidates);
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

}  // namespace zt
