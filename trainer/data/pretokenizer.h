// The first half of a BPE encoding: splitting text into the pieces merges stay inside of. Each
// encoding defines the split as a regex (tiktoken's pat_str: Unicode letter and number classes,
// a lookahead, case-insensitive contractions); PCRE2 runs it with Unicode properties and its JIT.
// The pattern is read as js-tiktoken, the oracle the tests compare with, reads it under
// JavaScript's /u flag: \s and \S are JavaScript's white space (which, unlike PCRE2's, includes
// U+FEFF), and (?i:...) folds ASCII letters only, as js-tiktoken's own spelling of those
// patterns does (Rust's tiktoken also folds U+017F and U+212A; text with those after an
// apostrophe may split differently there).
// Thread safety: split() is const and may run on several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zt::data {

// A piece of the text: bytes [begin, begin + length).
struct Piece {
  uint32_t begin;
  uint32_t length;
};

class Pretokenizer {
 public:
  // `pattern` as tiktoken writes it; `what` names the encoding in errors. Throws ConfigError
  // naming both when PCRE2 refuses the pattern.
  Pretokenizer(const std::string& pattern, const std::string& what);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Appends the pieces of `text` in order (text no match covers is dropped, as tiktoken drops
  // it). REQUIRES: `text` is valid UTF-8 shorter than 4 GiB.
  void split(std::string_view text, std::vector<Piece>& out) const;

  // `pattern` rewritten into PCRE2's dialect with the semantics above (exposed for its tests).
  static std::string to_pcre2(const std::string& pattern);

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  std::string what_;
};

}  // namespace zt::data
