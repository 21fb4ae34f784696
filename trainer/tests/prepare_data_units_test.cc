// trainer prepare-data cutting one --separator text file into work units. A unit boundary inside
// such a file must fall at the start of a separator line (boundary_after, plan_units): a cut
// anywhere else would split a document in two, or glue two together, and the token file would
// then depend on --unit-kb. prepare_data_test.cc splits only JSONL across units; here a ~100 KB
// fortune-style file ("%" lines between documents: some longer than a unit, some empty, some
// non-ASCII UTF-8, lines that merely start with "%"), with LF and with CRLF line ends, ending in a
// "%" line, in a "%" without a line end, or in a document without one, is prepared as one unit
// and in units of 4096, 1024 and 1 bytes on 1 to 3 threads. Checked: every run writes the same
// token file and document starts; each unit ends at the first separator line at or after its
// unit_bytes (read from the progress reports' bytes_done); empty documents (two separator lines
// in a row, or one first in the file) are no documents, so the index counts the non-empty ones;
// and each document's tokens are its text's, decoding back to it, then <|endoftext|>. A second
// case sweeps every unit size over two small files, so a cut is tried at every byte.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../../tests/test_util.h"
#include "data/bpe_tokenizer.h"
#include "data/prepare_data.h"
#include "data/token_index.h"
#include "data/tokenizer_files.h"
#include "tiny_encoding.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kEot = 300;  // tiny_encoding.h's <|endoftext|>

std::vector<uint16_t> ids_of(const fs::path& p) {
  const std::string b = test::read_file(p);
  std::vector<uint16_t> ids(b.size() / 2);
  std::memcpy(ids.data(), b.data(), ids.size() * 2);
  return ids;
}

// Where each line equal to "%" starts (its line end, LF or CRLF, not counted), found by reading
// the lines: the only places a unit may end, besides the end of the file.
std::vector<size_t> separator_line_starts(const std::string& text) {
  std::vector<size_t> starts;
  for (size_t at = 0; at <= text.size();) {
    const size_t nl = text.find('\n', at);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    std::string line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "%") starts.push_back(at);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return starts;
}

// The units' ends plan_units makes of one file: each unit ends at the first separator line that
// starts at or after its start + unit_bytes, else at the end of the file.
std::vector<int64_t> expected_cuts(const std::string& text, int64_t unit_bytes) {
  const std::vector<size_t> separators = separator_line_starts(text);
  std::vector<int64_t> cuts;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.size();
    for (const size_t s : separators) {
      if (s >= begin + static_cast<size_t>(unit_bytes)) {
        end = s;
        break;
      }
    }
    cuts.push_back(static_cast<int64_t>(end));
    begin = end;
  }
  return cuts;
}

enum class Ending { kSeparatorLine, kSeparatorNoLineEnd, kDocumentNoLineEnd };

struct SeparatedText {
  std::string bytes;                   // the file
  std::vector<std::string> documents;  // the non-empty documents, as prepare-data reads them
  int empty_documents = 0;             // separator lines with nothing between them
  size_t longest_document = 0;
};

// ~`target` bytes of documents between "%" lines, each line ended by `eol`. Document kinds cycle
// so each occurs: a few short lines, sometimes with a blank line or a line that only starts (or
// ends) with "%"; empty; non-ASCII UTF-8; medium (0.5 to 3 KB); and long ones (5 to 9 KB, more
// than a unit of 4096), either many lines or one line.
SeparatedText separated_text(const std::string& eol, Ending ending, bool leading_separator,
                             uint32_t seed, size_t target) {
  static const char* kWords[] = {"the", "then", "cat", "at", "ending", "in", "a", "sing", "hen"};
  static const char* kUtf8[] = {"caf\xC3\xA9",                               // café
                                "Stra\xC3\x9F\x65",                          // Straße
                                "\xCE\xA9\xCE\xBC\xCE\xAD\xCE\xB3\xCE\xB1",  // Ωμέγα
                                "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",      // 日本語
                                "\xF0\x9F\x99\x82",                          // 🙂
                                "na\xC3\xAFve"};                             // naïve
  static const char* kLookalikes[] = {"%%", "% ", " %", "%x", "100%", "%% the end %%"};
  std::mt19937 rng(seed);
  const auto words = [&](int n, bool utf8) {
    std::string line;
    for (int w = 0; w < n; ++w) {
      if (w) line += ' ';
      line += utf8 && rng() % 3 == 0 ? kUtf8[rng() % 6] : kWords[rng() % 9];
    }
    return line;
  };
  SeparatedText t;
  const std::string separator = "%" + eol;
  if (leading_separator) {
    t.bytes += separator;
    ++t.empty_documents;  // nothing before it
  }
  for (int d = 0; t.bytes.size() < target; ++d) {
    std::string doc;
    switch (d % 9) {
      case 2:
      case 7: break;  // empty: two separator lines in a row
      case 4:
        for (int l = 0, n = 1 + static_cast<int>(rng() % 4); l < n; ++l) {
          doc += words(3 + static_cast<int>(rng() % 8), true) + eol;
        }
        break;
      case 8:  // 0.5 to 3 KB: more than a unit of 1024, less than one of 4096
        while (doc.size() < 500 + rng() % 2500) {
          doc += words(2 + static_cast<int>(rng() % 14), d % 2 == 0) + eol;
        }
        break;
      case 5: {
        const size_t size = 5000 + rng() % 4000;
        if (d % 2 == 0) {  // one line, longer than a unit
          std::string line;
          while (line.size() < size) line += words(8, true) + ' ';
          doc = line + eol;
        } else {
          while (doc.size() < size)
            doc += words(2 + static_cast<int>(rng() % 14), d % 3 == 0) + eol;
        }
        break;
      }
      default:
        for (int l = 0, n = 1 + static_cast<int>(rng() % 4); l < n; ++l) {
          doc += words(1 + static_cast<int>(rng() % 10), false) + eol;
          if (rng() % 5 == 0) doc += eol;                           // a blank line inside
          if (rng() % 4 == 0) doc += kLookalikes[rng() % 6] + eol;  // not a separator line
        }
    }
    t.bytes += doc;
    if (doc.empty()) {
      ++t.empty_documents;
    } else {
      t.documents.push_back(doc);
      t.longest_document = std::max(t.longest_document, doc.size());
    }
    t.bytes += separator;
  }
  if (ending == Ending::kSeparatorNoLineEnd) {
    t.bytes.resize(t.bytes.size() - eol.size());  // the last line is a bare "%"
  } else if (ending == Ending::kDocumentNoLineEnd) {
    const std::string last = words(6, true) + eol + words(4, false);  // no separator after it
    t.bytes += last;
    t.documents.push_back(last);
  }
  return t;
}

// One preparation of `input` with --separator %, and each unit's end in the input (the progress
// reports' bytes_done: the input is one file).
struct Prepared {
  PrepareSummary summary;
  std::vector<int64_t> cuts;
};

Prepared prepare(const std::string& encoding, const fs::path& input, const fs::path& out,
                 int64_t unit_bytes, int threads) {
  PrepareRequest r;
  r.inputs = {input.string()};
  r.out_prefix = out.string();
  r.tokenizer = encoding;
  r.separator = "%";
  r.threads = threads;
  r.unit_bytes = unit_bytes;
  Prepared p;
  p.summary = prepare_data(
      r, [&p](const PrepareProgress& progress) { p.cuts.push_back(progress.bytes_done); });
  return p;
}

// The token file prepare-data should write for `documents`, and each document's start in it.
struct Expected {
  std::vector<uint16_t> ids;
  std::vector<uint64_t> starts{0};
  int64_t text_bytes = 0;
};

Expected expected_tokens(const BpeTokenizer& tokenizer, const std::vector<std::string>& documents) {
  Expected e;
  for (const std::string& doc : documents) {
    for (const uint32_t id : tokenizer.encode_ordinary(doc))
      e.ids.push_back(static_cast<uint16_t>(id));
    e.ids.push_back(static_cast<uint16_t>(kEot));
    e.starts.push_back(e.ids.size());
    e.text_bytes += static_cast<int64_t>(doc.size());
  }
  return e;
}

// Each document's tokens in `ids` (by the index's starts) decode to its text, then one
// <|endoftext|>, and no other <|endoftext|> among them.
void check_documents_decode(const BpeTokenizer& tokenizer, const std::vector<uint16_t>& ids,
                            const std::vector<uint64_t>& starts,
                            const std::vector<std::string>& documents) {
  REQUIRE(starts.size() == documents.size() + 1);
  REQUIRE(starts.back() == ids.size());
  for (size_t d = 0; d < documents.size(); ++d) {
    CAPTURE(d);
    REQUIRE(starts[d] < starts[d + 1]);
    const std::vector<uint32_t> doc(ids.begin() + static_cast<std::ptrdiff_t>(starts[d]),
                                    ids.begin() + static_cast<std::ptrdiff_t>(starts[d + 1]) - 1);
    CHECK(ids[starts[d + 1] - 1] == kEot);
    CHECK(std::count(doc.begin(), doc.end(), kEot) == 0);
    CHECK(tokenizer.decode(doc) == documents[d]);
  }
}

// Every cut is at a separator line's start, or the end of the file.
void check_cuts_at_separators(const std::string& text, const std::vector<int64_t>& cuts) {
  const std::vector<size_t> separators = separator_line_starts(text);
  REQUIRE(!cuts.empty());
  CHECK(cuts.back() == static_cast<int64_t>(text.size()));
  for (const int64_t cut : cuts) {
    CAPTURE(cut);
    CHECK((cut == static_cast<int64_t>(text.size()) ||
           std::find(separators.begin(), separators.end(), static_cast<size_t>(cut)) !=
               separators.end()));
  }
}

}  // namespace

TEST_CASE("prepare-data: a --separator text file cut into small units gives the bytes of one "
          "unit, on 1 to 3 threads, LF or CRLF") {
  test::TempDir dir;
  const std::string encoding = test::write_tiny_encoding(dir.path());
  const auto tokenizer = load_tokenizer(encoding, "");
  struct Variant {
    const char* name;
    std::string eol;
    Ending ending;
    bool leading_separator;
  };
  const std::vector<Variant> variants = {
      {"lf", "\n", Ending::kSeparatorLine, false},
      {"crlf", "\r\n", Ending::kSeparatorNoLineEnd, true},
      {"lf-last-document", "\n", Ending::kDocumentNoLineEnd, true},
      {"crlf-last-document", "\r\n", Ending::kDocumentNoLineEnd, false},
  };
  uint32_t seed = 11;
  for (const Variant& v : variants) {
    CAPTURE(v.name);
    const SeparatedText t = separated_text(v.eol, v.ending, v.leading_separator, seed++,
                                           100 * 1024);
    // The file holds what the test is about.
    REQUIRE(t.bytes.size() > 99 * 1024);
    REQUIRE(t.longest_document > 4096);
    REQUIRE(t.empty_documents > 0);
    REQUIRE(t.documents.size() > 50);
    REQUIRE(std::any_of(t.documents.begin(), t.documents.end(), [](const std::string& d) {
      return std::any_of(d.begin(), d.end(), [](char c) { return (c & 0x80) != 0; });
    }));
    const fs::path input = dir.path() / (std::string(v.name) + ".txt");
    test::write_file(input, t.bytes);
    REQUIRE(test::read_file(input) == t.bytes);

    // One unit: a unit size past the file's.
    const Prepared whole = prepare(encoding, input, dir.path() / (std::string(v.name) + "-whole"),
                                   int64_t{1} << 30, 1);
    CHECK(whole.summary.progress.units == 1);
    CHECK(whole.cuts == std::vector<int64_t>{static_cast<int64_t>(t.bytes.size())});
    const std::vector<uint16_t> ids = ids_of(whole.summary.tokens_path);
    const TokenIndex index = read_token_index(whole.summary.index_path);

    // Empty documents are none: the index counts the non-empty ones, and no <|endoftext|> stands
    // alone (two in a row) in the token file.
    CHECK(index.documents == static_cast<int64_t>(t.documents.size()));
    CHECK(whole.summary.progress.documents == static_cast<int64_t>(t.documents.size()));
    int64_t lone_eots = ids.empty() || ids[0] != kEot ? 0 : 1;
    for (size_t i = 1; i < ids.size(); ++i) lone_eots += ids[i] == kEot && ids[i - 1] == kEot;
    CHECK(lone_eots == 0);
    // Each document's text, encoded alone, then <|endoftext|>; its tokens decode back to it
    // (CRLF line ends included: the separator line's own line end is no document's).
    const Expected e = expected_tokens(*tokenizer, t.documents);
    CHECK(ids == e.ids);
    CHECK(index.document_starts == e.starts);
    CHECK(index.tokens == static_cast<int64_t>(e.ids.size()));
    CHECK(index.text_bytes == e.text_bytes);
    CHECK(whole.summary.text_bytes == e.text_bytes);
    check_documents_decode(*tokenizer, ids, index.document_starts, t.documents);

    // Small units on 1, 2 and 3 threads: --unit-kb 4 and 1 (its least), and 1 byte (a unit per
    // separator line).
    struct Run {
      int64_t unit_bytes;
      int threads;
    };
    for (const Run run : {Run{4096, 1}, Run{4096, 2}, Run{1024, 2}, Run{1, 3}}) {
      CAPTURE(run.unit_bytes);
      CAPTURE(run.threads);
      const std::string name = std::string(v.name) + "-" + std::to_string(run.unit_bytes) + "-" +
                               std::to_string(run.threads);
      const Prepared cut = prepare(encoding, input, dir.path() / name, run.unit_bytes, run.threads);
      CHECK(cut.summary.progress.units == static_cast<int64_t>(cut.cuts.size()));
      CHECK(cut.summary.progress.units > 5);  // really cut: ~100 KB, documents up to ~9 KB
      CHECK(cut.summary.threads == run.threads);
      check_cuts_at_separators(t.bytes, cut.cuts);
      CHECK(cut.cuts == expected_cuts(t.bytes, run.unit_bytes));
      CHECK(test::read_file(cut.summary.tokens_path) == test::read_file(whole.summary.tokens_path));
      const TokenIndex cut_index = read_token_index(cut.summary.index_path);
      CHECK(cut_index.document_starts == index.document_starts);
      CHECK(cut_index.documents == index.documents);
      CHECK(cut_index.text_bytes == index.text_bytes);
      CHECK(cut.summary.progress.documents == static_cast<int64_t>(t.documents.size()));
    }
  }
}

TEST_CASE("prepare-data: every unit size cuts a small --separator file at its separator lines "
          "only") {
  test::TempDir dir;
  const std::string encoding = test::write_tiny_encoding(dir.path());
  const auto tokenizer = load_tokenizer(encoding, "");
  struct Small {
    std::string text;
    std::vector<std::string> documents;
  };
  const std::vector<Small> files = {
      // A leading "%", lines that only start or end with "%", an empty document, CRLF and LF
      // separator lines in one file, a document starting with a blank line, and a last "%" with
      // no line end.
      {"%\r\nfirst\r\n%%\r\n%\r\n%\n% \ncaf\xC3\xA9 %x\n%\r\n\nx%\n%\nlast\n%",
       {"first\r\n%%\r\n", "% \ncaf\xC3\xA9 %x\n", "\nx%\n", "last\n"}},
      // Documents right after each other, and a last one with no line end.
      {"first\n%\n%\nsecond\r\n%\r\n\xE6\x97\xA5 then\n%\nthird",
       {"first\n", "second\r\n", "\xE6\x97\xA5 then\n", "third"}},
  };
  int n = 0;
  for (const Small& f : files) {
    CAPTURE(f.text);
    const fs::path input = dir.path() / ("small" + std::to_string(n++) + ".txt");
    test::write_file(input, f.text);
    const Expected e = expected_tokens(*tokenizer, f.documents);
    for (int64_t unit_bytes = 1; unit_bytes <= static_cast<int64_t>(f.text.size()) + 1;
         ++unit_bytes) {
      CAPTURE(unit_bytes);
      const Prepared p = prepare(encoding, input, input.string() + "-" + std::to_string(unit_bytes),
                                 unit_bytes, 2);
      check_cuts_at_separators(f.text, p.cuts);
      CHECK(p.cuts == expected_cuts(f.text, unit_bytes));
      const std::vector<uint16_t> ids = ids_of(p.summary.tokens_path);
      CHECK(ids == e.ids);
      const TokenIndex index = read_token_index(p.summary.index_path);
      CHECK(index.documents == static_cast<int64_t>(f.documents.size()));
      CHECK(index.document_starts == e.starts);
      CHECK(index.text_bytes == e.text_bytes);
      check_documents_decode(*tokenizer, ids, index.document_starts, f.documents);
    }
  }
}

}  // namespace zt::data
