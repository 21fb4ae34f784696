// Data sources: what the trainer feeds the model. A run reads one seeded stream of samples; the
// content of sample i depends only on (run.seed, i). An optimizer step trains on the next
// global-batch samples of the stream (micro_batch x grad_accum x world), and rank r takes, at
// micro step m, samples (m * world + r) * micro_batch + [0, micro_batch) of them. So which
// samples form a step does not depend on how its global batch is split: 1 rank x grad_accum 3
// and 3 ranks x grad_accum 1 train on the same samples, and a run resumed at another world size
// continues the stream where the checkpoint left it (the position is a sample index).
// Kinds: synthetic (seeded random tokens for models on tokens, random vectors for models on
// vectors: the mlp, vector TorchScript and plugin models), text (a file's bytes
// are the tokens, vocab 256), tokens (a flat little-endian uint16/uint32 token file, mmapped).
// File sources take each sample as a window of seq_len + 1 tokens at a seeded position: input =
// its first seq_len tokens, target = the same shifted by one.
// Thread safety: get*/describe are const and may be called from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "settings/job_settings.h"
#include "zt/model_plugin.h"

namespace zt::data {

// Tokens: input and target int64 [count, seq_len]; vectors: float [count, input_shape...] and
// [count, target_shape...] (mlp: [count, width] each). On the CPU.
struct Batch {
  at::Tensor input;
  at::Tensor target;
};

// Where data.val_fraction's held-out part starts.
struct HeldOutSplit {
  // In each file: "token 802 of 1003, a document's start"; a blend's files joined by "; "; ""
  // without a held-out part.
  std::string where;
  // Some file's part starts at a document's start (a prepared file's index said where), not at
  // the share's token.
  bool at_document = false;
};

class DataSource {
 public:
  DataSource(uint64_t seed, int64_t micro_batch, int64_t grad_accum);
  virtual ~DataSource();
  DataSource(const DataSource&) = delete;
  DataSource& operator=(const DataSource&) = delete;

  // Samples [first, first + count) of the stream. REQUIRES: first >= 0, count >= 0.
  virtual Batch get_samples(int64_t first, int64_t count) const = 0;
  // The micro_batch samples `rank` trains on at micro step `micro` of the optimizer step whose
  // global batch starts at sample `step_start`.
  // REQUIRES: holds_slice(step_start, micro, rank, world).
  Batch get(int64_t step_start, int micro, int rank, int world) const;
  // Whether get() takes these: step_start >= 0, 0 <= micro < grad_accum, 0 <= rank < world (a
  // caller that has the numbers from a user, zt.Data, checks them with it first).
  bool holds_slice(int64_t step_start, int micro, int rank, int world) const;
  // Micro step `micro`'s samples of every rank, in rank order: what a single-process reference
  // with world * micro_batch samples per micro step trains on.
  Batch global_batch(int64_t step_start, int micro, int world) const;
  // Samples one optimizer step consumes: micro_batch * grad_accum * world.
  int64_t samples_per_step(int world) const { return micro_batch_ * grad_accum_ * world; }
  // Kind, source, sizes: one line, or a line per source for a blend.
  virtual std::string describe() const = 0;
  // Where data.val_fraction's held-out part starts: what a checkpoint records, so a resume that
  // trains on other windows says so.
  virtual HeldOutSplit held_out_split() const { return {}; }

  uint64_t seed() const { return seed_; }
  int64_t micro_batch() const { return micro_batch_; }
  int64_t grad_accum() const { return grad_accum_; }

 protected:
  // A 64-bit key unique to (seed, sample index): the only input a sample's content has.
  uint64_t sample_key(int64_t sample) const;
  // Throws InternalError on a request outside get_samples' REQUIRES.
  void check_request(int64_t first, int64_t count) const;

 private:
  uint64_t seed_;
  int64_t micro_batch_;
  int64_t grad_accum_;
};

// The source `data` (the job's [data], settings/job_settings.h) asks for, shaped as `inputs` (the
// model's, zt/model_plugin.h) say; `model_kind` (model.kind) names the model in messages. File
// sources open and check their file here: IoError when it cannot be read, ConfigError when it does
// not fit the config (too short, size not a whole number of tokens); a token id >= vocab raises
// ConfigError when the window holding it is read. Every message names the file.
// With data.val_fraction, file sources take windows only from the tokens before the held-out
// tail, so no training sample reaches into it. In a prepared file (its index lists where documents
// start) the tail starts at the document start nearest the share's token that holds out between
// half and 1.5 times the share and leaves both parts a sample, so no document is in both; where
// none does, and in other files, at that token.
std::unique_ptr<DataSource> make_data(const trainer::DataSettings& data, const ModelInputs& inputs,
                                      const std::string& model_kind);

// The validation source ([eval]): data.val_path's file, data.val_fraction's held-out tail of
// data.path (no window reaches before it), or for synthetic data the same kind of stream from a
// seed of its own. Samples are drawn as training's are (a seeded window per index), so sample i
// is the same at every evaluation and world size. Throws ConfigError as make_data does, naming
// the key, when the part holds fewer than seq_len + 1 tokens.
std::unique_ptr<DataSource> make_val_data(const trainer::DataSettings& data,
                                          const ModelInputs& inputs, const std::string& model_kind,
                                          int64_t micro_batch);

}  // namespace zt::data
