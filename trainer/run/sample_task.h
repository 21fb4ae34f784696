// `trainer sample --checkpoint DIR`: text from a language model's checkpoint (the built-in GPT,
// or a TorchScript model whose output is logits [batch, T, vocab]), at any world size and ZeRO
// stage. Every rank runs every forward pass (stage 3 gathers the parameters of each unit from all
// ranks), each on its share of the samples, and all stop together after the forward in which the
// last unfinished sample anywhere ended, or at the budget: a rank whose samples end early keeps
// taking part instead of leaving the others waiting in a gather.
// Thread safety: the training thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "models/model.h"
#include "settings/job_settings.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/rendezvous.h"
#include "zt/store.h"

namespace zt::trainer {

// What to sample (trainer sample's flags).
struct SampleRequest {
  std::string checkpoint;       // --checkpoint: a checkpoint folder, its dir, or dir/best
  std::string prompt = "\n";    // --prompt: text (bytes, one token each, for byte-level text)
  std::vector<int64_t> tokens;  // --tokens: token ids instead of --prompt
  int64_t max_new_tokens = 200;
  double temperature = 0.8;  // 0 = greedy
  int64_t top_k = 0;         // 0 = every token
  uint64_t seed = 1;
  int64_t samples = 1;   // --samples: shared out among the ranks
  std::string stop;      // --stop: a sample ends when its new text holds this ('' = never)
  std::string out_path;  // --out: every sample's tokens and text as JSON ('' = none)
};

// The prompt as token ids: `request.tokens`, or `request.prompt` encoded by `tokenizer` (special
// tokens allowed), or without one its bytes. Throws ConfigError naming the flag, the token and
// model.vocab (with `vocab_where`, file:line) for an id at or above `vocab`, or an empty prompt.
std::vector<int64_t> prompt_tokens(const SampleRequest& request, int64_t vocab,
                                   const std::string& vocab_where,
                                   const data::BpeTokenizer* tokenizer = nullptr);

// What sampling starts from, its input checked against the checkpoint's config: the model's
// inputs, the text's tokenizer (null for byte-level text) and the prompt's tokens.
struct SamplePlan {
  ModelInputs inputs;
  std::shared_ptr<const data::BpeTokenizer> tokenizer;
  std::vector<int64_t> prompt;
};
// Throws ConfigError for a model that takes no tokens, a tokenizer larger than model.vocab, or a
// prompt outside the vocabulary (prompt_tokens). Touches no rank: run_job calls it before the
// ranks start, so bad input fails there, once.
SamplePlan plan_sample(const JobSettings& job, PluginCatalog& catalog,
                       const SampleRequest& request);

// One rank's part of the sampling (run_job's task for trainer sample). Collective.
int run_sample(const JobSettings& job, PluginCatalog& catalog, Store& store, const RankEnv& env,
               std::chrono::milliseconds timeout, const SampleRequest& request);

}  // namespace zt::trainer
