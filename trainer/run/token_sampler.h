// How `trainer sample` picks the next token from a language model's logits: greedy at
// temperature 0, else a draw from the softmax of logits / temperature over the top_k most likely
// tokens (0 = all). Each draw takes its uniform number from (seed, sample, position) alone, not
// from a generator's running state, so a sample's text does not depend on which rank generated
// it, how many samples that rank had, or the world size.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace zt::trainer {

struct SamplingSettings {
  double temperature = 0.8;  // 0 = greedy
  int64_t top_k = 0;         // 0 = every token
  uint64_t seed = 1;
};

// The uniform number in [0, 1) of sample `sample`'s draw at token position `position`.
double sampling_uniform(uint64_t seed, int64_t sample, int64_t position);

// The token after `position` tokens of sample `sample`, from its logits over the vocabulary.
// Ties (greedy, or the top_k cut) go to the lower token id. REQUIRES: logits not empty.
int64_t next_token(const std::vector<double>& logits, const SamplingSettings& settings,
                   int64_t sample, int64_t position);

}  // namespace zt::trainer
