// The trainer's data sources ([data]: synthetic, text, tokens; the same windows, seeds and rank
// slices) for a Python training loop, so a loop in Python reads exactly the batches `trainer`
// would with the same config.
// Thread safety: const methods may run on any thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/data_source.h"
#include "settings/job_settings.h"

namespace zt::python {

class DataStream {
 public:
  // The config as ModuleEngine reads it; [model]'s sizes (seq_len, vocab, ...) shape the samples.
  // `validation`: [eval]'s held-out data (data.val_path, data.val_fraction, or synthetic data's
  // own stream) instead of the training data. Throws ConfigError / IoError as the trainer does.
  DataStream(const std::string& config_path, const std::string& toml_text,
             const std::vector<std::string>& overrides, bool validation);
  // Rank `rank`'s micro batch `micro` of the optimizer step whose global batch starts at sample
  // `step_start` (the trainer's DataSource::get): (input, target).
  std::pair<at::Tensor, at::Tensor> get(int64_t step_start, int micro, int rank, int world) const;
  // Samples [first, first + count): (input, target).
  std::pair<at::Tensor, at::Tensor> samples(int64_t first, int64_t count) const;
  int64_t samples_per_step(int world) const { return source_->samples_per_step(world); }
  int64_t micro_batch() const { return source_->micro_batch(); }
  std::string describe() const { return source_->describe(); }
  // The run's BPE tokenizer (data.tokenizer, else a prepared file's), or null for byte-level
  // text, synthetic data and bare token files (data/run_tokenizer.h). Loaded at the first call:
  // batches of a prepared file need no tokenizer files (a compute node without them reads its
  // batches, as `trainer train` does). Throws ConfigError / IoError as run_tokenizer does.
  std::shared_ptr<const data::BpeTokenizer> tokenizer() const;

 private:
  std::unique_ptr<data::DataSource> source_;
  trainer::DataSettings data_;
  mutable std::once_flag tokenizer_loaded_;
  mutable std::shared_ptr<const data::BpeTokenizer> tokenizer_;
};

}  // namespace zt::python
