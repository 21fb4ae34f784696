// trainer sample's pieces that need no model: how the next token is picked (greedy, temperature,
// top-k; each draw a function of seed, sample and position only), and the prompt's checks.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "run/sample_task.h"
#include "run/token_sampler.h"
#include "zt/error.h"

using zt::trainer::next_token;
using zt::trainer::SamplingSettings;

namespace {

std::string error_of(const zt::trainer::SampleRequest& r, int64_t vocab) {
  try {
    zt::trainer::prompt_tokens(r, vocab, "job.toml:9:9");
  } catch (const zt::ConfigError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("greedy takes the highest logit, the lower id on a tie, whatever the seed") {
  const SamplingSettings greedy{0, 0, 7};
  CHECK(next_token({0.5, 2.0, -1.0, 1.9}, greedy, 0, 0) == 1);
  CHECK(next_token({3.0, 1.0, 3.0}, greedy, 5, 9) == 0);
  // top_k = 1 is greedy at any temperature.
  for (int64_t position = 0; position < 50; ++position)
    CHECK(next_token({0.5, 2.0, -1.0, 1.9}, {1.5, 1, 3}, 0, position) == 1);
}

TEST_CASE("a draw follows softmax(logits / temperature) over the top k") {
  // p = (0.25, 0.75) at temperature 1; at temperature 0.5, (0.1, 0.9).
  const std::vector<double> logits = {0.0, std::log(3.0), -50.0};
  for (const auto& [temperature, expected] : {std::pair{1.0, 0.75}, std::pair{0.5, 0.9}}) {
    CAPTURE(temperature);
    int ones = 0;
    const int draws = 20000;
    for (int64_t i = 0; i < draws; ++i) {
      const int64_t t = next_token(logits, {temperature, 2, 11}, i % 7, i);
      CHECK(t < 2);  // the third is outside the top 2
      ones += t == 1;
    }
    CHECK(std::abs(static_cast<double>(ones) / draws - expected) < 0.015);
  }
}

TEST_CASE("an id whose logit is -inf (no token of the tokenizer) is never drawn") {
  // Ids 1 and 3 are holes of the vocabulary (cl100k's 100256, say); the others are equal, so a
  // draw lands anywhere, the last one included (the fallback when u rounds to the total).
  const double hole = -std::numeric_limits<double>::infinity();
  const std::vector<double> logits = {0.0, hole, 0.0, hole};
  for (int64_t position = 0; position < 2000; ++position) {
    const int64_t id = next_token(logits, SamplingSettings{5.0, 0, 11}, 0, position);
    REQUIRE((id == 0 || id == 2));
  }
  CHECK(next_token(logits, SamplingSettings{0.0, 0, 11}, 0, 0) == 0);
}

TEST_CASE("a draw depends on (seed, sample, position) alone") {
  const std::vector<double> logits(64, 0.0);  // uniform: the draw is all the hash's
  const SamplingSettings a{1.0, 0, 1}, b{1.0, 0, 2};
  int same_seed_differs = 0, seeds_differ = 0, samples_differ = 0;
  for (int64_t p = 0; p < 200; ++p) {
    same_seed_differs += next_token(logits, a, 3, p) != next_token(logits, a, 3, p);
    seeds_differ += next_token(logits, a, 3, p) != next_token(logits, b, 3, p);
    samples_differ += next_token(logits, a, 3, p) != next_token(logits, a, 4, p);
  }
  CHECK(same_seed_differs == 0);
  CHECK(seeds_differ > 150);
  CHECK(samples_differ > 150);
  for (int64_t p = 0; p < 1000; ++p) {
    const double u = zt::trainer::sampling_uniform(9, 2, p);
    CHECK(u >= 0);
    CHECK(u < 1);
  }
}

TEST_CASE("the prompt: bytes or ids below model.vocab, named with its place when not") {
  zt::trainer::SampleRequest r;
  r.prompt = "Hi\xe9";
  CHECK(zt::trainer::prompt_tokens(r, 256, "") == std::vector<int64_t>{'H', 'i', 0xe9});
  const std::string bytes = error_of(r, 128);
  CHECK(contains(bytes, "--prompt byte 0xe9 (at offset 2) is not a token of this model: "
                        "model.vocab = 128 (job.toml:9:9)"));
  r.tokens = {5, 127, 128};
  CHECK(contains(error_of(r, 128), "--tokens id 128 (at position 2)"));
  r.tokens = {5, 127};
  CHECK(zt::trainer::prompt_tokens(r, 128, "") == std::vector<int64_t>{5, 127});
  r.tokens.clear();
  r.prompt.clear();
  CHECK(contains(error_of(r, 128), "--prompt is empty"));
}
