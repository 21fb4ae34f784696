// Data sources: what the trainer feeds the model, one batch per (optimizer step, micro step,
// rank). A global batch of (step, micro) holds world * micro_batch samples; rank r trains on
// samples [r * micro_batch, (r + 1) * micro_batch) of it. A sample's content depends only on
// (run.seed, step, micro, its index in the global batch), never on the rank or world size, so
// the slices of ranks 0..W-1 concatenate to exactly the batch a single-process reference gets
// from global_batch(step, micro, W).
// Kinds: synthetic (seeded random tokens for gpt, random vectors for mlp), text (a file's bytes
// are the tokens, vocab 256), tokens (a flat little-endian uint16/uint32 token file, mmapped).
// File sources take each sample as a window of seq_len + 1 tokens at a seeded position: input =
// its first seq_len tokens, target = the same shifted by one.
// Thread safety: get*/describe are const and may be called from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "models/model.h"
#include "zt/config.h"

namespace zt::data {

// gpt: input and target int64 [count, seq_len]; mlp: float [count, width] each. On the CPU.
struct Batch {
  at::Tensor input;
  at::Tensor target;
};

class DataSource {
 public:
  DataSource(uint64_t seed, int64_t micro_batch, int64_t grad_accum);
  virtual ~DataSource();
  DataSource(const DataSource&) = delete;
  DataSource& operator=(const DataSource&) = delete;

  // Samples [first_sample, first_sample + count) of the global batch of (step, micro).
  // REQUIRES: step >= 0, 0 <= micro < grad_accum, first_sample >= 0, count >= 0.
  virtual Batch get_samples(int64_t step, int micro, int64_t first_sample, int64_t count) const = 0;
  // Rank's micro_batch samples of that global batch. REQUIRES: 0 <= rank < world.
  Batch get(int64_t step, int micro, int rank, int world) const;
  // All world * micro_batch samples: what a single-process reference trains on.
  Batch global_batch(int64_t step, int micro, int world) const;
  // One line: kind, source, sizes.
  virtual std::string describe() const = 0;

  uint64_t seed() const { return seed_; }
  int64_t micro_batch() const { return micro_batch_; }
  int64_t grad_accum() const { return grad_accum_; }

 protected:
  // A 64-bit key unique to (seed, step, micro, sample): the only input a sample's content has.
  uint64_t sample_key(int64_t step, int micro, int64_t sample) const;
  // Throws InternalError on a request outside the REQUIRES above.
  void check_request(int64_t step, int micro, int64_t first_sample, int64_t count) const;

 private:
  uint64_t seed_;
  int64_t micro_batch_;
  int64_t grad_accum_;
};

// The source [data] asks for, shaped for `shape` (seq_len/vocab for gpt, width for mlp); seed
// from run.seed. File sources open and check their file here: IoError when it cannot be read,
// ConfigError when it does not fit the config (too short, size not a whole number of tokens);
// a token id >= vocab raises ConfigError when the window holding it is read. Every message
// names the file.
std::unique_ptr<DataSource> make_data(const Config& config, const models::ModelShape& shape);

}  // namespace zt::data
