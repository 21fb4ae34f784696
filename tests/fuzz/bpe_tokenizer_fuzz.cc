// Fuzz target: the BPE encoder on any bytes, under each known encoding's split pattern (GPT-2's,
// cl100k's and o200k's: lookaheads, Unicode classes, case-insensitive groups). The ranks are a
// small made-up vocabulary (every byte, some merges, a special token), so the target needs no
// installed files. Properties: every id is a token of the encoding; decode(encode(x)) is x with
// its ill-formed UTF-8 repaired; with the special token allowed, the text round-trips too; a
// refused special token is a ConfigError.
#include <memory>
#include <string>

#include "data/bpe_tokenizer.h"
#include "data/tokenizer_files.h"
#include "fuzz_support.h"
#include "zt/error.h"
#include "zt/host/utf8.h"

namespace {

std::unique_ptr<zt::data::BpeTokenizer> make(const std::string& encoding) {
  zt::data::BpeEncoding e;
  e.name = encoding;
  e.source = "the fuzz target";
  e.pattern = zt::data::split_pattern(encoding);
  for (int b = 0; b < 256; ++b) e.tokens.emplace_back(1, static_cast<char>(b));
  for (const char* m : {"th", "he", "the", " the", "in", "ing", "  ", "    ", "\n\n", "'s", "12",
                        "123", "\xEF\xBF\xBD", "\xC3\xA9", "er", "ere", "here"}) {
    e.tokens.emplace_back(m);
  }
  e.special["<|endoftext|>"] = static_cast<uint32_t>(e.tokens.size());
  return std::make_unique<zt::data::BpeTokenizer>(std::move(e));
}

void check(bool ok, const char* what) {
  if (!ok) throw std::logic_error(std::string("bpe_tokenizer fuzz: ") + what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<zt::data::BpeTokenizer> tokenizers[] = {
      make("gpt2"), make("cl100k_base"), make("o200k_base")};
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string repaired = zt::replace_invalid_utf8(text);
  for (const auto& t : tokenizers) {
    const std::vector<uint32_t> ids = t->encode_ordinary(text);
    for (const uint32_t id : ids) check(t->token_bytes(id) != nullptr, "an id that is no token");
    check(t->decode(ids) == repaired, "decode(encode_ordinary(x)) is not x repaired");
    zt::data::SpecialTokens all;
    all.allow_all = true;
    check(t->decode(t->encode(text, all)) == repaired, "decode(encode(x, all)) is not x repaired");
    // Refused exactly when the text holds a special token: a refusal of any other text was
    // taken as fine.
    try {
      (void)t->encode(text, zt::data::SpecialTokens{});
      check(repaired.find("<|endoftext|>") == std::string::npos, "a special token let through");
    } catch (const zt::ConfigError& e) {
      check(repaired.find("<|") != std::string::npos && repaired.find("|>") != std::string::npos,
            "a text without a special token refused");
      zt::fuzz::refused(e);
    }
  }
  return 0;
}
