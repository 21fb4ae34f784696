// The oracle: zt's BPE encoder against js-tiktoken (run under Node) on a corpus of several MB,
// for each of gpt2, cl100k_base and o200k_base. The corpus: English prose (Debian's fortunes),
// C++ (this repository's sources), 10 languages' scripts (iso-codes' translations, read whole:
// their binary headers are bytes that are not UTF-8, which both sides must repair alike), and a
// seeded mix of code points chosen to hit the patterns' edges (contractions in both cases and with
// U+017F, number runs, every white space character, combining marks, emoji sequences, stray bytes,
// special token text), and runs the patterns leave whole, thousands of bytes long (merged by a
// heap, not by the scan shorter pieces take). Every id must be equal; decode(encode(x)) must give x
// back (x repaired).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "../../tests/skip.h"
#include "../../tests/test_util.h"
#include "data/bpe_tokenizer.h"
#include "data/tokenizer_files.h"
#include "zt/host/utf8.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;

std::vector<uint32_t> read_ids(const fs::path& path) {
  const std::string bytes = test::read_file(path);
  std::vector<uint32_t> ids(bytes.size() / 4);
  std::memcpy(ids.data(), bytes.data(), ids.size() * 4);
  return ids;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Seeded text made of short runs, each from one of the classes the split patterns distinguish.
// Code points come from blocks assigned by Unicode 14, which both PCRE2 10.42 and Node's ICU know.
std::string edge_mix(size_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](uint32_t lo, uint32_t hi) {
    return static_cast<uint32_t>(lo + rng() % (hi - lo + 1));
  };
  const std::vector<uint32_t> spaces = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x20,
                                        0x20,   0x85,   0xA0,   0x1680, 0x2000, 0x2005, 0x200A,
                                        0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF};
  const std::vector<std::string> words = {"'s",
                                          "'S",
                                          "'ll",
                                          "'LL",
                                          "'Ve",
                                          "'d",
                                          "'t",
                                          "'re",
                                          "'\xC5\xBF",
                                          "'\xE2\x84\xAA",
                                          "<|endoftext|>",
                                          "<|endofprompt|>",
                                          "https://example.org/a/b",
                                          "\r\n",
                                          "//",
                                          "...",
                                          "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB"};
  std::string out;
  while (out.size() < bytes) {
    const int run = 1 + static_cast<int>(rng() % 8);
    const int kind = static_cast<int>(rng() % 12);
    for (int i = 0; i < run; ++i) {
      switch (kind) {
        case 0: append_utf8(out, pick('a', 'z')); break;
        case 1: append_utf8(out, pick('A', 'Z')); break;
        case 2: append_utf8(out, pick('0', '9')); break;
        case 3: append_utf8(out, pick(0x21, 0x2F)); break;
        case 4: append_utf8(out, spaces[rng() % spaces.size()]); break;
        case 5: append_utf8(out, pick(0xC0, 0x24F)); break;   // Latin with diacritics
        case 6: append_utf8(out, pick(0x300, 0x36F)); break;  // combining marks
        case 7: {
          // Other scripts: Greek, Cyrillic, Hebrew, Arabic, Devanagari, Thai, Hangul, Kana, CJK.
          static const uint32_t blocks[][2] = {{0x391, 0x3C9},   {0x410, 0x44F},   {0x5D0, 0x5EA},
                                               {0x621, 0x64A},   {0x905, 0x939},   {0xE01, 0xE30},
                                               {0xAC00, 0xD7A3}, {0x3041, 0x3096}, {0x4E00, 0x9FA5},
                                               {0x660, 0x669},   {0x966, 0x96F}};
          const auto& b = blocks[rng() % (sizeof(blocks) / sizeof(blocks[0]))];
          append_utf8(out, pick(b[0], b[1]));
          break;
        }
        case 8: {  // emoji, sometimes with a skin tone, variation selector or joiner
          append_utf8(out, pick(0x1F300, 0x1F64F));
          if (rng() % 3 == 0) append_utf8(out, pick(0x1F3FB, 0x1F3FF));
          if (rng() % 3 == 0) append_utf8(out, 0xFE0F);
          if (rng() % 4 == 0) append_utf8(out, 0x200D);
          break;
        }
        case 9: out += static_cast<char>(pick(0x80, 0xFF)); break;  // a stray byte
        case 10: out += words[rng() % words.size()]; break;
        default: out += std::string(1 + rng() % 40, rng() % 2 ? ' ' : '\n'); break;
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("tokenizer oracle: zt's ids equal js-tiktoken's on several MB for gpt2, cl100k, o200k") {
  const std::string tools = ZT_TEST_SOURCE_DIR "/.tools";
  const fs::path fortunes = "/usr/share/games/fortunes";
  const fs::path locales = "/usr/share/locale";
  const bool node = test::run_command("node --version").exit_code == 0;
  if (!node || !fs::exists(tools + "/node_modules/js-tiktoken/package.json") ||
      !fs::exists(fortunes / "fortunes") || !fs::exists(locales / "ja/LC_MESSAGES/iso_639-3.mo")) {
    ZT_SKIP_UNLESS_CI("node, js-tiktoken, tiktoken, gpt-3-encoder (npm), fortunes and iso-codes "
                      "(Debian) are needed; scripts/setup.sh installs them");
    return;
  }
  test::TempDir dir;
  // The corpus, one document per file.
  std::vector<std::pair<std::string, std::string>> docs;
  {
    std::string prose;
    // Every fortune file (not the .dat indexes or the .u8 links to the same files), by name.
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(fortunes)) {
      if (e.is_regular_file() && !e.is_symlink() && e.path().extension().empty()) {
        files.push_back(e.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) prose += test::read_file(f);
    docs.emplace_back("prose", prose);
    std::string code;
    for (const auto& e : fs::recursive_directory_iterator(ZT_TEST_SOURCE_DIR "/core/src")) {
      if (e.path().extension() == ".cc" && code.size() < (1u << 20))
        code += test::read_file(e.path());
    }
    docs.emplace_back("code", code);
    std::string scripts;
    for (const char* lang : {"ja", "ru", "ar", "zh_CN", "hi", "ko", "el", "th", "ka", "vi"}) {
      const fs::path mo = locales / lang / "LC_MESSAGES/iso_639-3.mo";
      if (fs::exists(mo)) scripts += test::read_file(mo);
    }
    docs.emplace_back("scripts", scripts);
    docs.emplace_back("edges", edge_mix(1 << 19, 20261129));
    // Runs the patterns leave whole, longer than BpeTokenizer::kLongPiece: merged by the heap.
    std::mt19937 rng(20261203);
    std::string runs = std::string(3000, '=') + " a" + std::string(3000, ' ') + "b\n";
    const std::string marks = "!#$%&*+-=@^_~|";
    for (int i = 0; i < 4000; ++i) runs += static_cast<char>('0' + rng() % 10);
    runs += " ";
    for (int i = 0; i < 3000; ++i) runs += marks[rng() % marks.size()];
    runs += "\n" + std::string(1000, '_') + "x";
    docs.emplace_back("runs", runs);
  }
  size_t total = 0;
  for (const auto& [name, text] : docs) {
    std::ofstream(dir.path() / (name + ".txt"), std::ios::binary) << text;
    total += text.size();
  }
  MESSAGE("corpus: " << total / 1000 << " kB in " << docs.size() << " documents");
  CHECK(total > 3'000'000);

  for (const std::string encoding : {"gpt2", "cl100k_base", "o200k_base"}) {
    CAPTURE(encoding);
    std::string command = "node " ZT_TEST_SOURCE_DIR
                          "/tests/fixtures/tokenizer/js_tiktoken_encode.mjs " +
                          tools + " " + encoding + " none";
    for (const auto& doc : docs) {
      command += " " + (dir.path() / (doc.first + ".txt")).string() + " " +
                 (dir.path() / (doc.first + "." + encoding + ".ids")).string();
    }
    const test::CommandResult js = test::run_command(command);
    REQUIRE_MESSAGE(js.exit_code == 0, js.output);
    const auto zt = load_tokenizer(encoding, tools + "/node_modules");
    for (const auto& [name, text] : docs) {
      CAPTURE(name);
      const std::vector<uint32_t> expected = read_ids(dir.path() /
                                                      (name + "." + encoding + ".ids"));
      const std::vector<uint32_t> got = zt->encode_ordinary(text);
      if (got != expected) {
        const auto diff = std::mismatch(got.begin(), got.end(), expected.begin(), expected.end());
        const size_t at = static_cast<size_t>(diff.first - got.begin());
        const auto context = [&](const std::vector<uint32_t>& ids) {
          const size_t from = at > 4 ? at - 4 : 0;
          const size_t to = std::min(ids.size(), at + 4);
          std::string s;
          for (size_t i = from; i < to; ++i) s += std::to_string(ids[i]) + " ";
          return s + "| '" + zt->decode(ids.data() + from, to - from) + "'";
        };
        FAIL_CHECK("first difference at id " << at << " of " << expected.size() << ": zt "
                                             << context(got) << " vs js-tiktoken "
                                             << context(expected));
      }
      CHECK(zt->decode(got) == replace_invalid_utf8(text));
    }
  }
}

TEST_CASE("tokenizer oracle: special tokens allowed as tiktoken allows them equal js-tiktoken's") {
  const std::string tools = ZT_TEST_SOURCE_DIR "/.tools";
  if (test::run_command("node --version").exit_code != 0 ||
      !fs::exists(tools + "/node_modules/js-tiktoken/package.json")) {
    ZT_SKIP_UNLESS_CI("node and js-tiktoken are needed; scripts/setup.sh installs them");
    return;
  }
  test::TempDir dir;
  const std::string text = "one<|endoftext|>two <|endofprompt|><|fim_prefix|>x<|endoftext|>";
  std::ofstream(dir.path() / "s.txt", std::ios::binary) << text;
  for (const std::string encoding : {"cl100k_base", "o200k_base"}) {
    CAPTURE(encoding);
    const auto ids = dir.path() / (encoding + ".ids");
    const test::CommandResult js = test::run_command(
        "node " ZT_TEST_SOURCE_DIR "/tests/fixtures/tokenizer/js_tiktoken_encode.mjs " + tools +
        " " + encoding + " all " + (dir.path() / "s.txt").string() + " " + ids.string());
    REQUIRE_MESSAGE(js.exit_code == 0, js.output);
    SpecialTokens all;
    all.allow_all = true;
    const auto zt = load_tokenizer(encoding, tools + "/node_modules");
    CHECK(zt->encode(text, all) == read_ids(ids));
    CHECK(zt->decode(zt->encode(text, all)) == text);
  }
}

}  // namespace zt::data
