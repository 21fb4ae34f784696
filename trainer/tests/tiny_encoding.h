// A small BPE encoding in tiktoken's JSON form for tests that need real files but not the
// published encodings: every byte, a few English merges, and <|endoftext|> = 300 (so ids fit
// uint16 and a model.vocab of 320). Written by the test into its own folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace zt::test {

inline std::string base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = 0;
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    for (size_t k = 0; k < 3; ++k) {
      chunk = (chunk << 8) | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    }
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

// Writes DIR/NAME.json and returns its path; load it with load_tokenizer(path, ""). `last` is
// its last merge: another gives another encoding of the same size.
inline std::string write_tiny_encoding(const std::filesystem::path& dir,
                                       const std::string& name = "tiny",
                                       const std::string& last = "end") {
  std::string ranks = "! 0";
  for (int b = 0; b < 256; ++b) ranks += " " + base64(std::string(1, static_cast<char>(b)));
  for (const char* merge : {"th", "he", "the", " the", "in", "ing", " a", "at", "en"}) {
    ranks += " " + base64(merge);
  }
  ranks += " " + base64(last);
  const std::string path = (dir / (name + ".json")).string();
  std::ofstream(path)
      << R"({"pat_str": "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", )"
      << R"("special_tokens": {"<|endoftext|>": 300}, "bpe_ranks": ")" << ranks << "\"}";
  return path;
}

}  // namespace zt::test
