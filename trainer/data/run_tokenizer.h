// The tokenizer a job's text goes through, for what turns ids back into text (trainer sample) or
// measures text (trainer eval's bits per byte): data.tokenizer, else the one a prepared token
// file's index names. Byte-level text (data.kind = "text") needs none: a token is a byte.
// Thread safety: pure functions over files.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/token_index.h"
#include "settings/job_settings.h"

namespace zt::data {

// The headers (no document starts) of the prepared files the job reads, data.path or data.paths
// then data.val_path, each with its token file's path; files without an index are left out.
// ConfigError naming two files whose tokenizers differ (a blend must speak one vocabulary).
std::vector<std::pair<std::string, TokenIndex>> prepared_indexes(const trainer::DataSettings& data);

// The job's BPE tokenizer, or nullptr when it has none (text, synthetic, or a bare token file
// and no data.tokenizer). ConfigError when the tokenizer's installed files differ from those a
// prepared file was made with (their fingerprints differ), naming both.
std::shared_ptr<const BpeTokenizer> run_tokenizer(const trainer::DataSettings& data);

// Bytes of text per token of the validation data: 1 for byte-level text, a prepared file's
// text bytes over its tokens (a blend: the files' ratios weighted by their shares), 0 when
// unknown (synthetic data, bare token files).
double text_bytes_per_token(const trainer::DataSettings& data);

}  // namespace zt::data
