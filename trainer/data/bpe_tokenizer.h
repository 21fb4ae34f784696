// Byte-level BPE as GPT-2 and tiktoken define it: text (UTF-8) is split into pieces by the
// encoding's pattern (data/pretokenizer.h), and each piece's bytes are merged pair by pair, the
// pair whose merged bytes have the lowest rank first (the leftmost on a tie), until no adjacent
// pair is a token. A token's id is its rank. Special tokens (<|endoftext|>) are ids past the
// merges that ordinary text never produces; encode() treats them as tiktoken does.
// Thread safety: immutable after construction; encode and decode may run on many threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/pretokenizer.h"

namespace zt::data {

// What defines an encoding; data/tokenizer_files.h reads one from its published files.
struct BpeEncoding {
  std::string name;                         // "gpt2", "cl100k_base", ...
  std::string pattern;                      // the split regex (tiktoken's pat_str)
  std::vector<std::string> tokens;          // tokens[rank]: its bytes ("" = no token has the rank)
  std::map<std::string, uint32_t> special;  // special token text -> id
  std::string source;                       // the file(s) it was read from, for messages
};

// Which special tokens a text may contain (tiktoken's allowed_special / disallowed_special).
struct SpecialTokens {
  std::vector<std::string> allowed;  // become their ids where they occur in the text
  bool allow_all = false;            // every special token of the encoding is allowed
  bool refuse_others = true;         // any other special token in the text is an error
};

class BpeTokenizer {
 public:
  // Throws ConfigError naming `encoding.source` when the encoding is inconsistent (two tokens
  // with the same bytes, a special id that is also a rank, a missing single byte).
  explicit BpeTokenizer(BpeEncoding encoding);
  ~BpeTokenizer();
  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  const std::string& name() const { return encoding_.name; }
  const std::string& source() const { return encoding_.source; }
  // One past the highest id, specials included (tiktoken's n_vocab).
  uint32_t vocab_size() const { return vocab_size_; }
  // The id of a special token, or -1 when the encoding has none by that name.
  int64_t special_id(std::string_view text) const;
  // A 64-bit digest of the pattern, every token and every special: equal digests, equal ids.
  uint64_t fingerprint() const { return fingerprint_; }

  // Appends the ids of `text`, special tokens read as plain text (tiktoken's encode_ordinary).
  // Bytes that are not UTF-8 are read as U+FFFD, as the references read them.
  void encode_ordinary(std::string_view text, std::vector<uint32_t>& out) const;
  std::vector<uint32_t> encode_ordinary(std::string_view text) const;
  // tiktoken's encode: allowed special tokens become their ids; with refuse_others, a text that
  // contains any other special token is refused (ConfigError naming the token and its offset).
  std::vector<uint32_t> encode(std::string_view text, const SpecialTokens& specials) const;

  // The bytes of `ids` (specials as their text). Throws ConfigError naming the first id that is
  // no token of this encoding.
  std::string decode(const uint32_t* ids, size_t count) const;
  std::string decode(const std::vector<uint32_t>& ids) const {
    return decode(ids.data(), ids.size());
  }
  // One token's bytes, or nullptr for an id that is no token.
  const std::string* token_bytes(uint32_t id) const;

 private:
  class RankTable;
  void encode_valid(std::string_view text, std::vector<uint32_t>& out) const;
  void merge_piece(std::string_view piece, std::vector<uint32_t>& out) const;
  void merge_long_piece(std::string_view piece, std::vector<uint32_t>& out) const;
  // Longer pieces merge through a heap (merge_long_piece); shorter ones by a scan, faster there.
  static constexpr size_t kLongPiece = 256;

  BpeEncoding encoding_;
  std::unique_ptr<RankTable> ranks_;
  std::unique_ptr<Pretokenizer> split_;
  std::vector<const std::string*> by_id_;  // id -> bytes (ranks and specials), nullptr = none
  uint32_t vocab_size_ = 0;
  uint64_t fingerprint_ = 0;
};

}  // namespace zt::data
