// The synthetic, text and tokens data sources.
#include "data/data_source.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/StringUtil.h>
#include <c10/util/accumulate.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iomanip>
#include <sstream>

#include "data/mapped_file.h"
#include "data/run_tokenizer.h"
#include "data/token_index.h"
#include "data/tokenizer_files.h"
#include "zt/error.h"
#include "zt/host/utf8.h"

namespace zt::data {

namespace {

// Mixed into the run's seed for the validation stream, so its samples are not the training ones.
constexpr uint64_t kValidationSalt = 0x76616c6964617465ull;  // "validate"

// splitmix64's finaliser: spreads a few differing input bits over the whole word.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

at::Generator generator_for(uint64_t key) {
  // LibTorch's mt19937 keeps only the low 32 bits of a seed, so fold the high half into them.
  return at::make_generator<at::CPUGeneratorImpl>((key ^ (key >> 32)) & 0xffffffffULL);
}

// Random token ids for gpt: each sample is seq_len + 1 uniform tokens, so target = input
// shifted by one just as for file windows.
class SyntheticTokens final : public DataSource {
 public:
  SyntheticTokens(uint64_t seed, int64_t micro_batch, int64_t grad_accum, int64_t seq_len,
                  int64_t vocab)
      : DataSource(seed, micro_batch, grad_accum), seq_len_(seq_len), vocab_(vocab) {}

  Batch get_samples(int64_t first, int64_t count) const override {
    check_request(first, count);
    at::Tensor input = at::empty({count, seq_len_}, at::kLong);
    at::Tensor target = at::empty({count, seq_len_}, at::kLong);
    for (int64_t i = 0; i < count; ++i) {
      at::Tensor row = at::randint(vocab_, {seq_len_ + 1}, generator_for(sample_key(first + i)),
                                   at::kLong);
      input[i].copy_(row.narrow(0, 0, seq_len_));
      target[i].copy_(row.narrow(0, 1, seq_len_));
    }
    return {input, target};
  }

  std::string describe() const override {
    return "synthetic tokens: uniform over vocab " + std::to_string(vocab_) + ", seq_len " +
           std::to_string(seq_len_) + ", seed " + std::to_string(seed());
  }

 private:
  int64_t seq_len_;
  int64_t vocab_;
};

// Random input and target vectors, both N(0, 1): one draw of input + target elements per
// sample, split (for the mlp, [width] each).
class SyntheticVectors final : public DataSource {
 public:
  SyntheticVectors(uint64_t seed, int64_t micro_batch, int64_t grad_accum,
                   std::vector<int64_t> input_shape, std::vector<int64_t> target_shape)
      : DataSource(seed, micro_batch, grad_accum),
        input_shape_(std::move(input_shape)),
        target_shape_(std::move(target_shape)) {}

  Batch get_samples(int64_t first, int64_t count) const override {
    check_request(first, count);
    const int64_t in = c10::multiply_integers(input_shape_);
    const int64_t out = c10::multiply_integers(target_shape_);
    at::Tensor input = at::empty({count, in}, at::kFloat);
    at::Tensor target = at::empty({count, out}, at::kFloat);
    for (int64_t i = 0; i < count; ++i) {
      at::Tensor draw = at::randn({in + out}, generator_for(sample_key(first + i)), at::kFloat);
      input[i].copy_(draw.narrow(0, 0, in));
      target[i].copy_(draw.narrow(0, in, out));
    }
    return {input.reshape(with_batch(count, input_shape_)),
            target.reshape(with_batch(count, target_shape_))};
  }

  std::string describe() const override {
    return c10::str("synthetic vectors: N(0, 1) input ", at::IntArrayRef(input_shape_),
                    " and target ", at::IntArrayRef(target_shape_), ", seed ", seed());
  }

 private:
  static std::vector<int64_t> with_batch(int64_t count, const std::vector<int64_t>& shape) {
    std::vector<int64_t> out{count};
    out.insert(out.end(), shape.begin(), shape.end());
    return out;
  }

  std::vector<int64_t> input_shape_;
  std::vector<int64_t> target_shape_;
};

// Windows of seq_len + 1 tokens from a token stream on disk: a text file's bytes (element size
// 1) or a flat little-endian uint16/uint32 file, as nanoGPT's prepare scripts write them.
class FileTokens final : public DataSource {
 public:
  // `key` names the file's key in messages (data.path, data.val_path). `keep` picks the tokens
  // windows come from: the whole file, its first or its last `fraction` (data.val_fraction).
  // `documents` finds a document start (a prepared file's index, nearest_document_start); empty
  // where the file has no documents: the two parts then meet at a token.
  enum class Keep { kAll, kHead, kTail };
  using DocumentStarts = std::function<int64_t(int64_t token, int64_t lo, int64_t hi)>;
  FileTokens(uint64_t seed, int64_t micro_batch, int64_t grad_accum, int64_t seq_len, int64_t vocab,
             const std::string& kind, const std::string& path, const std::string& key,
             const std::string& where, int element_size, Keep keep = Keep::kAll,
             double fraction = 0, const DocumentStarts& documents = {})
      : DataSource(seed, micro_batch, grad_accum),
        seq_len_(seq_len),
        vocab_(vocab),
        kind_(kind),
        what_(kind + " file '" + path + "' (" + key + ", " + where + ")"),
        element_size_(element_size),
        file_(path, what_, key) {
    if (file_.size() % static_cast<size_t>(element_size_) != 0) {
      throw ConfigError(what_ + " is " + std::to_string(file_.size()) +
                        " bytes, not a whole number of " + std::to_string(element_size_) +
                        "-byte tokens; check data.token_dtype (uint16 or uint32) or whether the "
                        "file was truncated");
    }
    n_tokens_ = static_cast<int64_t>(file_.size()) / element_size_;
    // The held-out tail starts at a whole token; the head ends there, so no window of one
    // reaches a token of the other. Where the file has documents, it starts at a document's, so
    // no document is trained on in part and validated on in part: the one nearest the share's
    // token that leaves both parts a sample and holds out between half and 1.5 times the share.
    int64_t split = n_tokens_ -
                    static_cast<int64_t>(std::floor(static_cast<double>(n_tokens_) * fraction));
    std::string split_note;
    if (keep != Keep::kAll && documents) {
      const int64_t least = seq_len_ + 1, reach = (n_tokens_ - split) / 2;
      const int64_t start = documents(split, std::max(least, split - reach),
                                      std::min(n_tokens_ - least, split + reach));
      split_at_document_ = start >= 0;
      if (start >= 0) split = start;
      char share[64];
      std::snprintf(
          share, sizeof share, " (%.1f%% of the file)",
          100.0 * static_cast<double>(n_tokens_ - split) / static_cast<double>(n_tokens_));
      split_note = ", from token " + std::to_string(split) + share +
                   (start >= 0 ? ", a document's start"
                               : ", inside a document: no document start near the share's token "
                                 "leaves both parts a sample");
    }
    split_ = keep == Keep::kAll ? -1 : split;
    end_ = keep == Keep::kHead ? split : n_tokens_;
    begin_ = keep == Keep::kTail ? split : 0;
    const std::string part = keep == Keep::kAll ? ""
                             : keep == Keep::kHead
                                 ? " (the part before data.val_fraction's" + split_note + ")"
                                 : " (data.val_fraction's held-out part" + split_note + ")";
    if (end_ - begin_ < seq_len_ + 1) {
      throw ConfigError(
          what_ + part + " holds " + std::to_string(end_ - begin_) +
          " tokens, but one sample needs seq_len + 1 = " + std::to_string(seq_len_ + 1) +
          "; use a longer file, a smaller model.seq_len" +
          (keep == Keep::kAll ? "" : " or another data.val_fraction"));
    }
    what_ += part;
  }

  Batch get_samples(int64_t first, int64_t count) const override {
    check_request(first, count);
    at::Tensor input = at::empty({count, seq_len_}, at::kLong);
    at::Tensor target = at::empty({count, seq_len_}, at::kLong);
    std::vector<int64_t> window(static_cast<size_t>(seq_len_ + 1));
    const uint64_t n_windows = static_cast<uint64_t>(end_ - begin_ - seq_len_);
    for (int64_t i = 0; i < count; ++i) {
      // The modulo bias is below n_windows / 2^64: irrelevant for sampling.
      int64_t start = begin_ + static_cast<int64_t>(sample_key(first + i) % n_windows);
      read_window(start, window.data());
      std::memcpy(input[i].data_ptr<int64_t>(), window.data(), seq_len_ * sizeof(int64_t));
      std::memcpy(target[i].data_ptr<int64_t>(), window.data() + 1, seq_len_ * sizeof(int64_t));
    }
    return {input, target};
  }

  // The tokens windows come from.
  int64_t tokens() const { return end_ - begin_; }

  HeldOutSplit held_out_split() const override {
    if (split_ < 0) return {};
    return {"token " + std::to_string(split_) + " of " + std::to_string(n_tokens_) +
                (split_at_document_ ? ", a document's start" : ""),
            split_at_document_};
  }

  std::string describe() const override {
    return what_ + ": " + std::to_string(end_ - begin_) + " tokens, " +
           std::to_string(end_ - begin_ - seq_len_) +
           " windows of seq_len + 1 = " + std::to_string(seq_len_ + 1) + ", vocab " +
           std::to_string(vocab_) + ", seed " + std::to_string(seed());
  }

 private:
  int64_t token_at(int64_t index) const {
    const unsigned char* p = file_.data() + index * element_size_;
    switch (element_size_) {
      case 1: return p[0];
      case 2: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return v;
      }
      default: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
    }
  }

  // Ids are checked as windows are read rather than by scanning the whole file at open: a corpus
  // of many GB would cost every rank a full read before the first step, and a window is exactly
  // what is trained on.
  void read_window(int64_t start, int64_t* out) const {
    for (int64_t j = 0; j <= seq_len_; ++j) {
      int64_t id = token_at(start + j);
      if (id >= vocab_) {
        throw ConfigError(what_ + ": token " + std::to_string(id) + " at index " +
                          std::to_string(start + j) + " is >= the model's vocab " +
                          std::to_string(vocab_) + "; raise model.vocab or check " +
                          (kind_ == "tokens" ? "data.token_dtype and the tokenizer"
                                             : "model.vocab (byte-level text needs 256)"));
      }
      out[j] = id;
    }
  }

  int64_t seq_len_;
  int64_t vocab_;
  std::string kind_;
  std::string what_;
  int64_t element_size_;
  MappedFile file_;
  int64_t n_tokens_ = 0;
  int64_t begin_ = 0, end_ = 0;  // the tokens windows come from
  int64_t split_ = -1;           // where the held-out tail starts; -1 without one
  bool split_at_document_ = false;
};

// Mixed into a sample's key to pick its file of a blend, so the pick and the window within the
// file are independent draws.
constexpr uint64_t kBlendSalt = 0x626c656e64ull;  // "blend"

// A blend of files (data.paths): sample i comes from the file a seeded draw of (seed, i) picks
// with data.weights' odds, and is that file's own sample i. Nothing depends on earlier samples,
// so any world size sees the same samples and a resume continues the stream exactly.
class BlendedTokens final : public DataSource {
 public:
  BlendedTokens(uint64_t seed, int64_t micro_batch, int64_t grad_accum,
                std::vector<std::unique_ptr<FileTokens>> parts, std::vector<double> weights)
      : DataSource(seed, micro_batch, grad_accum), parts_(std::move(parts)) {
    if (weights.empty()) {
      for (const auto& p : parts_) weights.push_back(static_cast<double>(p->tokens()));
    }
    double total = 0;
    for (const double w : weights) total += w;
    double sum = 0;
    for (const double w : weights) {
      sum += w;
      shares_.push_back(w / total);
      cumulative_.push_back(sum / total);
    }
    cumulative_.back() = 1.0;
  }

  Batch get_samples(int64_t first, int64_t count) const override {
    check_request(first, count);
    std::vector<at::Tensor> inputs, targets;
    for (int64_t i = 0; i < count; ++i) {
      const Batch one = parts_[part_of(first + i)]->get_samples(first + i, 1);
      inputs.push_back(one.input);
      targets.push_back(one.target);
    }
    if (count == 0) return parts_.front()->get_samples(first, 0);
    return {at::cat(inputs), at::cat(targets)};
  }

  HeldOutSplit held_out_split() const override {
    HeldOutSplit splits;
    for (const auto& p : parts_) {
      const HeldOutSplit one = p->held_out_split();
      if (one.where.empty()) continue;
      splits.where += (splits.where.empty() ? "" : "; ") + one.where;
      splits.at_document = splits.at_document || one.at_document;
    }
    return splits;
  }

  std::string describe() const override {
    std::ostringstream s;
    s << "a blend of " << parts_.size() << " files, seed " << seed() << ":";
    for (size_t i = 0; i < parts_.size(); ++i) {
      s << "\n  " << std::fixed << std::setprecision(1) << 100 * shares_[i] << "% "
        << parts_[i]->describe();
    }
    return s.str();
  }

 private:
  size_t part_of(int64_t sample) const {
    const double u = static_cast<double>(mix64(sample_key(sample) ^ kBlendSalt) >> 11) *
                     0x1.0p-53;  // [0, 1)
    const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
    return std::min(static_cast<size_t>(it - cumulative_.begin()), parts_.size() - 1);
  }

  std::vector<std::unique_ptr<FileTokens>> parts_;
  std::vector<double> shares_, cumulative_;
};

}  // namespace

DataSource::DataSource(uint64_t seed, int64_t micro_batch, int64_t grad_accum)
    : seed_(seed), micro_batch_(micro_batch), grad_accum_(grad_accum) {}

DataSource::~DataSource() = default;

namespace {

[[noreturn]] void slice_refused(int64_t step_start, int micro, int64_t grad_accum, int rank,
                                int world) {
  throw InternalError("data source asked for micro step " + std::to_string(micro) +
                      " (grad_accum " + std::to_string(grad_accum) + ") of rank " +
                      std::to_string(rank) + " of world " + std::to_string(world) +
                      " from sample " + std::to_string(step_start));
}

}  // namespace

bool DataSource::holds_slice(int64_t step_start, int micro, int rank, int world) const {
  return step_start >= 0 && micro >= 0 && micro < grad_accum_ && world >= 1 && rank >= 0 &&
         rank < world;
}

Batch DataSource::get(int64_t step_start, int micro, int rank, int world) const {
  if (!holds_slice(step_start, micro, rank, world))
    slice_refused(step_start, micro, grad_accum_, rank, world);
  return get_samples(step_start + (int64_t{micro} * world + rank) * micro_batch_, micro_batch_);
}

Batch DataSource::global_batch(int64_t step_start, int micro, int world) const {
  if (!holds_slice(step_start, micro, 0, world))
    slice_refused(step_start, micro, grad_accum_, 0, world);
  return get_samples(step_start + int64_t{micro} * world * micro_batch_, world * micro_batch_);
}

uint64_t DataSource::sample_key(int64_t sample) const {
  return mix64(mix64(seed_) ^ static_cast<uint64_t>(sample));
}

void DataSource::check_request(int64_t first, int64_t count) const {
  if (first < 0 || count < 0) {
    throw InternalError("data source asked for samples " + std::to_string(first) + " + " +
                        std::to_string(count));
  }
}

namespace {

// The prepared files' index headers (prepared_indexes: read once, checked to share a tokenizer).
using Indexes = std::vector<std::pair<std::string, TokenIndex>>;

// `path`'s index header, or null for a file without one.
const TokenIndex* index_of(const Indexes& indexes, const std::string& path) {
  const auto found = std::find_if(indexes.begin(), indexes.end(),
                                  [&](const auto& entry) { return entry.first == path; });
  return found == indexes.end() ? nullptr : &found->second;
}

// Whether the file's first 4 KiB (a file of at least 64 bytes) are printable UTF-8 text: tabs,
// newlines and characters from the space up. A file of token ids is not: uint32 ids have zero
// high bytes, and uint16 ids read as text would need every id in [0x2020, 0x7E7E] (with a
// valid UTF-8 pairing for those above), where the most frequent ids of any BPE vocabulary are
// below 8192. nanoGPT's input.txt given as data.kind = "tokens" read as byte pairs, ids all
// below a vocab of 50304, and trained on noise without a word.
bool looks_like_text(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;  // the reader names the failure
  char head[4096];
  const size_t n = std::fread(head, 1, sizeof(head), f);
  std::fclose(f);
  if (n < 64) return false;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(head[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return false;
    if (c == 0x7F) return false;
  }
  // A character cut at the 4 KiB boundary is no fault: up to 3 bytes of it are left out.
  for (size_t cut = 0; cut <= 3 && cut < n; ++cut) {
    if (is_valid_utf8(std::string_view(head, n - cut))) return true;
  }
  return false;
}

// A prepared token file's index (trainer prepare-data wrote PREFIX.idx beside PREFIX.bin), checked
// against the config: its tokenizer against data.tokenizer, its ids against model.vocab, its
// width against data.token_dtype. Returns the element size to read the file with.
int checked_element_size(const trainer::DataSettings& data, const Indexes& indexes,
                         const std::string& path, const std::string& key, const std::string& where,
                         int64_t model_vocab) {
  const TokenIndex* found = index_of(indexes, path);
  // A prepared file read as text trained on the bytes of its ids (each below 256: nothing else
  // stopped it), and evaluated them as text.
  if (!found && data.kind == "text" && is_token_index(index_path_for(path))) {
    throw ConfigError(path + " (" + key + ", " + where + ") is a prepared token file (" +
                      index_path_for(path) + " is its index), but data.kind is \"text\" (" +
                      data.kind_where + "): set data.kind = \"tokens\" to train on its ids");
  }
  if (!found && data.kind == "tokens" && looks_like_text(path)) {
    throw ConfigError(path + " (" + key + ", " + where +
                      ") has no index (.idx) and reads as text, not token ids (its first bytes "
                      "are printable UTF-8, where a file of ids holds a zero or a control byte "
                      "within its first few), but data.kind is \"tokens\" (" +
                      data.kind_where +
                      "): set data.kind = \"text\" to train on its bytes, or make ids of it "
                      "(trainer prepare-data " +
                      path + " --out PREFIX) and train on PREFIX.bin");
  }
  if (!found) {  // a bare token file, or text
    // A uint32 file has an even size, and each of its ids read as two uint16 (its low half,
    // then 0 or 1) is below any vocabulary: nothing else would stop a training on garbage.
    if (data.kind == "tokens" && data.element_size == 2 && !data.token_dtype_set &&
        model_vocab > 65536) {
      throw ConfigError(path + " (" + key + ", " + where +
                        ") has no index (.idx) to give its "
                        "token width, data.token_dtype is not set (uint16 by default), and " +
                        "model.vocab is " + std::to_string(model_vocab) +
                        ", whose ids do not fit 16 bits; set data.token_dtype = \"uint32\" for a "
                        "file of 32-bit ids (or \"uint16\" if it truly holds 16-bit ones)");
    }
    return data.element_size;
  }
  const TokenIndex& index = *found;
  const std::string index_path = index_path_for(path);
  const std::string made = path + " (" + key + ", " + where + ") was made with tokenizer '" +
                           index.tokenizer + "' (" + index_path + ")";
  if (!data.tokenizer.empty() && encoding_name(data.tokenizer) != index.tokenizer) {
    throw ConfigError(made + ", but data.tokenizer is '" + data.tokenizer + "' (" +
                      data.tokenizer_where + "); prepare it again with --tokenizer " +
                      data.tokenizer + ", or set data.tokenizer = \"" + index.tokenizer + "\"");
  }
  if (index.vocab > model_vocab) {
    throw ConfigError(made + ", whose ids go up to " + std::to_string(index.vocab - 1) +
                      ", but model.vocab is " + std::to_string(model_vocab) +
                      "; set model.vocab to at least " + std::to_string(index.vocab) +
                      " (a multiple of 64 above it, e.g. " +
                      std::to_string((index.vocab + 63) / 64 * 64) + ", runs faster)");
  }
  if (data.token_dtype_set && index.element_size() != data.element_size) {
    throw ConfigError(made + " as " + index.dtype + ", but data.token_dtype (" +
                      data.token_dtype_where +
                      ") says otherwise; remove data.token_dtype (the "
                      "index gives it)");
  }
  struct stat tokens_file {};
  if (::stat(path.c_str(), &tokens_file) == 0 &&
      static_cast<int64_t>(tokens_file.st_size) != index.tokens * index.element_size()) {
    throw ConfigError(made + ": it holds " + std::to_string(tokens_file.st_size) +
                      " bytes, but its index "
                      "counts " +
                      std::to_string(index.tokens) + " " + index.dtype +
                      " tokens; the two files are not from the same run of prepare-data, prepare "
                      "it again");
  }
  return index.element_size();
}

// Where `path`'s documents start (its index), or empty for a file without an index (text, a
// bare token file).
FileTokens::DocumentStarts document_starts(const Indexes& indexes, const std::string& path) {
  const TokenIndex* index = index_of(indexes, path);
  if (!index) return {};
  const std::string index_path = index_path_for(path);
  const TokenIndex header = *index;
  return [index_path, header](int64_t token, int64_t lo, int64_t hi) {
    return nearest_document_start(index_path, header, token, lo, hi);
  };
}

// data.paths' files, each its own stream (its seed mixed with its place in the list), as one
// blended source; `keep` as for a single file, applied to each.
std::unique_ptr<DataSource> make_blend(const trainer::DataSettings& data, const ModelInputs& inputs,
                                       const Indexes& indexes, FileTokens::Keep keep) {
  std::vector<std::unique_ptr<FileTokens>> parts;
  for (size_t i = 0; i < data.paths.size(); ++i) {
    const std::string key = "data.paths[" + std::to_string(i) + "]";
    parts.push_back(std::make_unique<FileTokens>(
        mix64(data.seed ^ (kBlendSalt + i)), data.micro_batch, data.grad_accum, inputs.seq_len,
        inputs.vocab, data.kind, data.paths[i], key, data.paths_where,
        checked_element_size(data, indexes, data.paths[i], key, data.paths_where, inputs.vocab),
        keep, data.val_fraction, document_starts(indexes, data.paths[i])));
  }
  return std::make_unique<BlendedTokens>(data.seed, data.micro_batch, data.grad_accum,
                                         std::move(parts), data.weights);
}

}  // namespace

std::unique_ptr<DataSource> make_data(const trainer::DataSettings& data, const ModelInputs& inputs,
                                      const std::string& model_kind) {
  if (!inputs.tokens) {
    if (data.kind != "synthetic") {
      throw ConfigError(data.kind_where + ": data.kind = \"" + data.kind +
                        "\" gives token ids, which model.kind = \"" + model_kind +
                        "\" cannot take (it takes vectors); use data.kind = \"synthetic\"");
    }
    return std::make_unique<SyntheticVectors>(data.seed, data.micro_batch, data.grad_accum,
                                              inputs.input_shape, inputs.target_shape);
  }
  if (data.kind == "synthetic") {
    return std::make_unique<SyntheticTokens>(data.seed, data.micro_batch, data.grad_accum,
                                             inputs.seq_len, inputs.vocab);
  }
  const Indexes indexes = prepared_indexes(data);  // the files must agree on their tokenizer
  if (!data.paths.empty()) {
    return make_blend(data, inputs, indexes,
                      data.val_fraction > 0 ? FileTokens::Keep::kHead : FileTokens::Keep::kAll);
  }
  return std::make_unique<FileTokens>(
      data.seed, data.micro_batch, data.grad_accum, inputs.seq_len, inputs.vocab, data.kind,
      data.path, "data.path", data.path_where,
      checked_element_size(data, indexes, data.path, "data.path", data.path_where, inputs.vocab),
      data.val_fraction > 0 ? FileTokens::Keep::kHead : FileTokens::Keep::kAll, data.val_fraction,
      document_starts(indexes, data.path));
}

std::unique_ptr<DataSource> make_val_data(const trainer::DataSettings& data,
                                          const ModelInputs& inputs, const std::string& model_kind,
                                          int64_t micro_batch) {
  // A stream of its own: sample i of validation is never sample i of training.
  trainer::DataSettings val = data;
  val.seed = mix64(data.seed ^ kValidationSalt);
  val.micro_batch = micro_batch;
  val.grad_accum = 1;
  if (!inputs.tokens || data.kind == "synthetic") return make_data(val, inputs, model_kind);
  const bool own_file = !data.val_path.empty();
  const Indexes indexes = prepared_indexes(data);
  if (!own_file && !data.paths.empty()) {
    return make_blend(val, inputs, indexes, FileTokens::Keep::kTail);
  }
  const std::string& path = own_file ? data.val_path : data.path;
  const std::string key = own_file ? "data.val_path" : "data.path";
  const std::string& where = own_file ? data.val_path_where : data.path_where;
  return std::make_unique<FileTokens>(
      val.seed, micro_batch, 1, inputs.seq_len, inputs.vocab, data.kind, path, key, where,
      checked_element_size(data, indexes, path, key, where, inputs.vocab),
      own_file ? FileTokens::Keep::kAll : FileTokens::Keep::kTail, data.val_fraction,
      document_starts(indexes, path));
}

}  // namespace zt::data
