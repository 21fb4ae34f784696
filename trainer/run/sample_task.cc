#include "run/sample_task.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "data/run_tokenizer.h"
#include "models/model.h"
#include "report/report_file.h"
#include "run/checkpointing.h"
#include "run/evaluation.h"
#include "run/loaded_model.h"
#include "run/stop_signals.h"
#include "run/token_sampler.h"
#include "settings/job_settings.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"

namespace zt::trainer {

namespace {

// One sample this rank generates: its tokens after the prompt, and whether it has ended.
struct Row {
  int64_t sample = -1;  // -1: padding, so every rank runs forwards of the same batch
  std::vector<int64_t> tokens;
  int64_t generated = 0;
  bool ended = false;
  std::string ended_by = "budget";
};

// Ids as text: through the run's BPE tokenizer, as bytes for byte-level text, else (a bare
// token file's, synthetic data's vocabulary) as numbers.
class TextOf {
 public:
  TextOf(const data::BpeTokenizer* bpe, bool bytes) : bpe_(bpe), bytes_(bytes) {}
  std::string operator()(std::vector<int64_t>::const_iterator begin,
                         std::vector<int64_t>::const_iterator end) const {
    std::string text;
    for (auto it = begin; it != end; ++it) {
      const int64_t t = *it;
      if (bpe_) {
        const std::string* b = t >= 0 && t <= UINT32_MAX
                                   ? bpe_->token_bytes(static_cast<uint32_t>(t))
                                   : nullptr;
        text += b ? *b : "<|id " + std::to_string(t) + "|>";
      } else {
        text += bytes_ ? std::string(1, static_cast<char>(t)) : " " + std::to_string(t);
      }
    }
    return text;
  }
  std::string operator()(const std::vector<int64_t>& tokens) const {
    return (*this)(tokens.begin(), tokens.end());
  }
  // The ids that are text (the tokenizer's, or the 256 bytes); 0: every id the model has.
  int64_t text_ids() const {
    if (bpe_) return static_cast<int64_t>(bpe_->vocab_size());
    return bytes_ ? 256 : 0;
  }
  // Ids below text_ids() that are no token (cl100k's 100256 and the unassigned ids among its
  // specials): drawn, they printed as "<|id N|>".
  std::vector<int64_t> holes() const {
    std::vector<int64_t> out;
    if (!bpe_) return out;
    for (uint32_t id = 0; id < bpe_->vocab_size(); ++id) {
      if (!bpe_->token_bytes(id)) out.push_back(id);
    }
    return out;
  }

 private:
  const data::BpeTokenizer* bpe_;
  bool bytes_;
};

// Whether a row's new text holds the stop text (for byte-level text: ends with it, a byte at a
// time; a BPE token may carry the stop text and more, so there it is anywhere in the new text).
bool stop_reached(const std::vector<int64_t>& tokens, int64_t generated, const std::string& stop,
                  const TextOf& text_of, bool bpe) {
  if (stop.empty()) return false;
  const std::string text = text_of(tokens.end() - generated, tokens.end());
  if (bpe) return text.find(stop) != std::string::npos;
  return text.size() >= stop.size() &&
         text.compare(text.size() - stop.size(), stop.size(), stop) == 0;
}

// The last position's logits of every row, as doubles; NumericError when one is not finite.
std::vector<std::vector<double>> last_logits(const at::Tensor& out, int64_t vocab) {
  if (out.dim() != 3 || out.size(2) != vocab) {
    throw ConfigError("trainer sample needs a language model whose forward gives logits [batch, "
                      "T, vocab = " +
                      std::to_string(vocab) + "]; this one gives " +
                      std::string(at::toString(out.scalar_type())) + " " + c10::str(out.sizes()) +
                      "");
  }
  const at::Tensor last = out.select(1, out.size(1) - 1).to(at::kCPU, at::kDouble).contiguous();
  std::vector<std::vector<double>> rows(static_cast<size_t>(last.size(0)));
  const double* p = last.data_ptr<double>();
  for (size_t r = 0; r < rows.size(); ++r) {
    rows[r].assign(p + r * vocab, p + (r + 1) * vocab);
    // -inf is an id the model rules out (a custom model masking unused ids does so), as the
    // sampler does with padding; NaN and +inf say its weights or its forward are broken.
    for (double v : rows[r]) {
      if (std::isnan(v) || v == std::numeric_limits<double>::infinity()) {
        throw NumericError("the model's logits hold " + std::to_string(v) +
                           " while sampling: the checkpoint's weights (or a custom model's "
                           "forward) are not finite; sample from an earlier checkpoint");
      }
    }
  }
  return rows;
}

// The rows' last `context` tokens as one batch [rows, context].
at::Tensor context_batch(const std::vector<Row>& rows, int64_t context) {
  at::Tensor ids = at::empty({static_cast<int64_t>(rows.size()), context}, at::kLong);
  int64_t* p = ids.data_ptr<int64_t>();
  for (const Row& row : rows) {
    std::copy(row.tokens.end() - context, row.tokens.end(), p);
    p += context;
  }
  return ids;
}

std::string sample_key(int64_t sample) { return "zt/sample/" + std::to_string(sample); }

std::vector<uint8_t> encode(const Row& row) {
  std::string text = row.ended_by;
  for (size_t i = row.tokens.size() - row.generated; i < row.tokens.size(); ++i)
    text += " " + std::to_string(row.tokens[i]);
  return {text.begin(), text.end()};
}

Row decode(int64_t sample, const std::vector<uint8_t>& bytes) {
  Row row;
  row.sample = sample;
  std::string text(bytes.begin(), bytes.end());
  size_t at = text.find(' ');
  row.ended_by = text.substr(0, at);
  while (at != std::string::npos) {
    const size_t next = text.find(' ', at + 1);
    row.tokens.push_back(std::stoll(text.substr(at + 1, next - at - 1)));
    at = next;
  }
  row.generated = static_cast<int64_t>(row.tokens.size());
  return row;
}

}  // namespace

std::vector<int64_t> prompt_tokens(const SampleRequest& request, int64_t vocab,
                                   const std::string& vocab_where,
                                   const data::BpeTokenizer* tokenizer) {
  std::vector<int64_t> tokens = request.tokens;
  const bool bytes = tokens.empty() && !tokenizer;
  if (tokens.empty() && tokenizer) {
    data::SpecialTokens all;
    all.allow_all = true;
    for (const uint32_t id : tokenizer->encode(request.prompt, all)) tokens.push_back(id);
  } else if (bytes) {
    for (unsigned char c : request.prompt) tokens.push_back(c);
  }
  if (tokens.empty()) {
    throw ConfigError("--prompt is empty: sampling starts from at least one token (the default "
                      "prompt is a newline)");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= 0 && tokens[i] < vocab) continue;
    char what[96];
    if (bytes) {
      std::snprintf(what, sizeof what, "--prompt byte 0x%02llx (at offset %zu)",
                    static_cast<unsigned long long>(tokens[i]), i);
    } else {
      std::snprintf(what, sizeof what, "%s id %lld (at position %zu)",
                    request.tokens.empty() ? "--prompt's token" : "--tokens",
                    static_cast<long long>(tokens[i]), i);
    }
    throw ConfigError(std::string(what) + " is not a token of this model: model.vocab = " +
                      std::to_string(vocab) + " (" + vocab_where + ")" +
                      (bytes ? "; byte-level text maps each byte to its token, so use bytes "
                               "below " +
                                   std::to_string(vocab) + " or give --tokens"
                             : "; give ids from 0 to " + std::to_string(vocab - 1)));
  }
  return tokens;
}

namespace {

// The last position's logits of the rows' forward, with the padding of model.vocab and the
// tokenizer's holes ruled out. Throws NumericError when a row cannot be sampled.
std::vector<std::vector<double>> sampleable_logits(Engine& engine, LoadedModel& loaded,
                                                   const ModelInputs& inputs,
                                                   const std::vector<Row>& rows, int64_t context,
                                                   const TextOf& text_of,
                                                   const std::vector<int64_t>& holes) {
  auto logits = last_logits(
      forward_without_grad(engine, loaded.own_forward,
                           engine_input(context_batch(rows, context), loaded.setup.options)),
      inputs.vocab);
  // A model.vocab padded past the tokenizer's ids (50304 for GPT-2's 50257), or past the 256
  // bytes of byte-level text, never samples the padding: those ids are no text (an id of 300
  // printed as the byte 300 % 256).
  if (const int64_t ids = text_of.text_ids(); ids > 0) {
    for (auto& row : logits) {
      if (static_cast<int64_t>(row.size()) > ids) row.resize(static_cast<size_t>(ids));
      for (const int64_t hole : holes)
        row[static_cast<size_t>(hole)] = -std::numeric_limits<double>::infinity();
    }
  }
  // After the padding and the tokenizer's holes are out: a row with nothing left to draw
  // (every id ruled out by the model or by them) drew NaN weights, and id 0 without a word.
  for (const auto& row : logits) {
    if (std::none_of(row.begin(), row.end(), [](double v) { return std::isfinite(v); })) {
      throw NumericError("the model's logits rule out every token id while sampling (-inf "
                         "for each id of the text, or finite only on the padding of "
                         "model.vocab): check a custom model's masking (model.kind)");
    }
  }
  return logits;
}

// What this rank generated: its rows, and how.
struct Generation {
  std::vector<Row> rows;
  int64_t forwards = 0;
  double seconds = 0;
};

// Rank r generates samples r, r + world, ...; every rank the same number of rows, and every rank
// stops at the same forward. Collective.
Generation generate(LoadedModel& loaded, const ModelInputs& inputs, const SampleRequest& request,
                    const std::vector<int64_t>& prompt, const RankEnv& env, const TextOf& text_of,
                    const data::BpeTokenizer* bpe) {
  Engine& engine = *loaded.setup.engine;
  Communicator& comm = *loaded.setup.comm;
  const int64_t per_rank = (request.samples + env.world - 1) / env.world;
  Generation g;
  g.rows.resize(static_cast<size_t>(per_rank));
  for (int64_t j = 0; j < per_rank; ++j) {
    const int64_t sample = env.rank + env.world * j;
    g.rows[j].sample = sample < request.samples ? sample : -1;
    g.rows[j].ended = g.rows[j].sample < 0;
    g.rows[j].tokens = prompt;
  }
  const SamplingSettings how{request.temperature, request.top_k, request.seed};
  const InferenceScope inference(loaded.model->shape);
  const std::vector<int64_t> holes = text_of.holes();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t n = 0; n < request.max_new_tokens; ++n) {
    const int64_t length = static_cast<int64_t>(g.rows[0].tokens.size());
    const int64_t context = std::min(length, inputs.seq_len);
    // A rank whose logits cannot be sampled says so to the others at this forward's agreement
    // below: thrown alone it left them waiting in the next forward's gathers until the timeout.
    std::string failure;
    std::vector<std::vector<double>> logits;
    try {
      logits = sampleable_logits(engine, loaded, inputs, g.rows, context, text_of, holes);
    } catch (const NumericError& e) {
      failure = e.what();
    }
    ++g.forwards;
    int64_t open = 0;
    for (size_t j = 0; failure.empty() && j < g.rows.size(); ++j) {
      Row& row = g.rows[j];
      // Ended rows keep growing (with any token) so the batch stays rectangular.
      const int64_t token = row.ended ? 0 : next_token(logits[j], how, row.sample, length);
      row.tokens.push_back(token);
      if (row.ended) continue;
      ++row.generated;
      if (stop_reached(row.tokens, row.generated, request.stop, text_of, bpe != nullptr)) {
        row.ended = true;
        row.ended_by = "stop";
      }
      open += row.ended ? 0 : 1;
    }
    // Every rank learns whether any sample anywhere is still open, whether any rank got a
    // stop signal (Ctrl-C), and the highest rank whose logits failed: all stop at the same
    // forward.
    const at::Tensor anywhere = at::tensor(
        {static_cast<double>(open), static_cast<double>(stop_signal_received()),
         failure.empty() ? 0.0 : env.rank + 1.0},
        at::kDouble);
    all_reduce_host(comm, anywhere, ReduceOp::kMax);
    if (!failure.empty()) throw NumericError(failure);
    if (const int failed = static_cast<int>(anywhere[2].item<double>())) {
      throw NumericError("rank " + std::to_string(failed - 1) + " could not sample at forward " +
                         std::to_string(n + 1) +
                         ": its logits were not finite or ruled out every token id (its own "
                         "error above says which); no sample written");
    }
    if (const int sig = static_cast<int>(anywhere[1].item<double>())) {
      throw StoppedBySignal(sig, "trainer sample stopped after " + std::to_string(n + 1) + " of " +
                                     std::to_string(request.max_new_tokens) +
                                     " forwards; no sample written");
    }
    if (anywhere[0].item<double>() == 0) break;
  }
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (Row& row : g.rows) {
    if (row.sample >= 0) row.tokens.resize(prompt.size() + row.generated);
  }
  return g;
}

// Every sample's new tokens, in order, on rank 0 (the other ranks publish theirs through the
// store and get nothing back).
std::vector<Row> gather_samples(const Generation& g, size_t prompt_size, int64_t samples,
                                Store& store, const RankEnv& env,
                                std::chrono::milliseconds timeout) {
  if (env.rank != 0) {
    for (const Row& row : g.rows) {
      if (row.sample >= 0) store.set(sample_key(row.sample), encode(row));
    }
    return {};
  }
  std::vector<Row> all;
  for (int64_t s = 0; s < samples; ++s) {
    if (s % env.world == 0) {
      all.push_back(g.rows[s / env.world]);
      all.back().tokens.erase(all.back().tokens.begin(),
                              all.back().tokens.begin() + static_cast<std::ptrdiff_t>(prompt_size));
    } else {
      all.push_back(decode(s, store.get(sample_key(s), timeout)));
    }
  }
  return all;
}

// Rank 0: every sample printed, then the rate; every sample's tokens and text into --out.
void report_samples(const std::vector<Row>& all, const Generation& g, const LoadedModel& loaded,
                    const CheckpointReader& reader, const std::vector<int64_t>& prompt,
                    const TextOf& text_of, const SampleRequest& request, int world) {
  int64_t generated = 0;
  nlohmann::json samples = nlohmann::json::array();
  std::printf("zt sample: %s\n  checkpoint %s (step %lld), world %d, ZeRO stage %d, %s\n",
              loaded.model->describe().c_str(), reader.folder().c_str(),
              static_cast<long long>(reader.step()), world, loaded.setup.options.stage,
              loaded.setup.shard_id.c_str());
  const int64_t seq_len = models::model_inputs(loaded.model->shape).seq_len;
  if (seq_len > 0 && static_cast<int64_t>(prompt.size()) > seq_len) {
    // As nanoGPT's sample.py crops its context: the tokens before the window condition nothing.
    std::printf("  note: the prompt is %zu tokens and the model's context %lld: only its last %lld "
                "condition the samples\n",
                prompt.size(), static_cast<long long>(seq_len), static_cast<long long>(seq_len));
  }
  for (const Row& row : all) {
    generated += row.generated;
    std::printf("--- sample %lld of %lld: %lld new tokens (ended by %s)\n%s%s\n",
                static_cast<long long>(row.sample + 1), static_cast<long long>(request.samples),
                static_cast<long long>(row.generated), row.ended_by.c_str(),
                text_of(prompt).c_str(), text_of(row.tokens).c_str());
    samples.push_back({{"sample", row.sample},
                       {"tokens", row.tokens},
                       {"text", text_of(row.tokens)},
                       {"ended_by", row.ended_by}});
  }
  std::printf("---\nsampled %lld tokens in %.2f s: %.1f tokens/s (%lld forward passes of %zu "
              "row(s) per rank; temperature %g, top-k %lld, seed %llu)\n",
              static_cast<long long>(generated), g.seconds, generated / g.seconds,
              static_cast<long long>(g.forwards), g.rows.size(), request.temperature,
              static_cast<long long>(request.top_k), static_cast<unsigned long long>(request.seed));
  std::fflush(stdout);
  if (request.out_path.empty()) return;
  const nlohmann::json j = {{"checkpoint", reader.folder()},
                            {"step", reader.step()},
                            {"world", world},
                            {"prompt", prompt},
                            {"samples", samples},
                            {"seconds", g.seconds},
                            {"tokens_per_s", generated / g.seconds}};
  // Through a temporary file: an earlier result stays whole until this one is.
  write_report_file(request.out_path,
                    j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace

SamplePlan plan_sample(const JobSettings& job, PluginCatalog& catalog,
                       const SampleRequest& request) {
  const models::ModelShape shape = models::resolve_model_shape(job.model, catalog);
  const ModelInputs inputs = models::model_inputs(shape);
  if (!inputs.tokens) {
    throw ConfigError("trainer sample needs a language model (token ids in, logits out); "
                      "model.kind = \"" +
                      shape.kind + "\" (" + job.places.where("model.kind") + ") takes vectors");
  }
  const auto tokenizer = data::run_tokenizer(job.data);
  if (!tokenizer && job.data.kind == "tokens" && request.tokens.empty()) {
    // A token file's ids are not bytes: encoding the prompt's bytes would feed the model ids
    // of another vocabulary, and its text would come back as bare numbers.
    const std::string file = job.data.path.empty() ? job.data.paths.front() : job.data.path;
    throw ConfigError("--prompt cannot be encoded: data.kind = \"tokens\" (" +
                      job.places.where("data.kind") + ") names no tokenizer, and " +
                      data::index_path_for(file) +
                      " (the index trainer prepare-data writes beside its tokens, naming the "
                      "tokenizer) is not there; set the tokenizer the tokens were made with "
                      "(--set data.tokenizer=gpt2), or give --tokens ID,ID,...");
  }
  if (tokenizer && tokenizer->vocab_size() > inputs.vocab) {
    throw ConfigError("tokenizer '" + tokenizer->name() + "' has " +
                      std::to_string(tokenizer->vocab_size()) + " ids, more than model.vocab = " +
                      std::to_string(inputs.vocab) + " (" + job.places.where("model.vocab") +
                      "); this checkpoint's model cannot have been trained on its text");
  }
  std::vector<int64_t> prompt = prompt_tokens(request, inputs.vocab,
                                              job.places.where("model.vocab"), tokenizer.get());
  if (!request.out_path.empty()) make_folder_of(request.out_path, "--out " + request.out_path);
  return SamplePlan{inputs, tokenizer, std::move(prompt)};
}

int run_sample(const JobSettings& job, PluginCatalog& catalog, Store& store, const RankEnv& env,
               std::chrono::milliseconds timeout, const SampleRequest& request) {
  share_cores_between_local_ranks();
  const SamplePlan plan = plan_sample(job, catalog, request);
  const ModelInputs& inputs = plan.inputs;
  const std::vector<int64_t>& prompt = plan.prompt;
  const data::BpeTokenizer* tokenizer = plan.tokenizer.get();
  const TextOf text_of(tokenizer, job.data.kind == "text");
  const std::unique_ptr<CheckpointReader> opened = open_rank0_checkpoint(
      [&] { return open_checkpoint_within(request.checkpoint, timeout); },
      "trainer sample --checkpoint " + request.checkpoint, request.checkpoint, store,
      "sample/checkpoint", env.rank, timeout);
  const CheckpointReader& reader = *opened;
  LoadedModel loaded = load_checkpointed_model(job, catalog, env, store, timeout, reader);
  // On stderr: stdout is the samples.
  if (env.rank == 0) std::fputs(unsaved_buffers_note(loaded.model->shape).c_str(), stderr);
  const Generation g = generate(loaded, inputs, request, prompt, env, text_of, tokenizer);
  const std::vector<Row> all = gather_samples(g, prompt.size(), request.samples, store, env,
                                              timeout);
  if (env.rank == 0) {
    report_samples(all, g, loaded, reader, prompt, text_of, request, env.world);
  }
  return 0;
}

}  // namespace zt::trainer
