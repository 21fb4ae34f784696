// trainer prepare-data's pipeline on a small encoding written by the test: the token file is
// each document's ids then <|endoftext|>, in input order, whatever the threads and unit size; the
// index counts the documents; an interrupted run resumes to the same bytes; bad inputs are named
// with their line; the data source refuses a prepared file that disagrees with the config; and
// data.val_fraction holds out whole documents of a prepared file.
#include <ATen/ATen.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "../../tests/test_util.h"
#include "data/bpe_tokenizer.h"
#include "data/data_source.h"
#include "data/prepare_data.h"
#include "data/run_tokenizer.h"
#include "data/token_index.h"
#include "data/tokenizer_files.h"
#include "settings/job_settings.h"
#include "settings/trainer_config.h"
#include "tiny_encoding.h"
#include "zt/error.h"
#include "zt/file_lock.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;

bool contains_text(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<uint16_t> ids_of(const fs::path& p) {
  const std::string b = test::read_file(p);
  std::vector<uint16_t> ids(b.size() / 2);
  std::memcpy(ids.data(), b.data(), ids.size() * 2);
  return ids;
}

// A job's [data] on one prepared (or bare) token file, and a GPT's inputs of seq_len 8.
trainer::DataSettings tokens_at(const std::string& path) {
  trainer::DataSettings d;
  d.kind = "tokens";
  d.path = path;
  d.path_where = "job.toml:3:1";
  d.micro_batch = 2;
  return d;
}

ModelInputs gpt_inputs(int64_t vocab) {
  ModelInputs in;
  in.tokens = true;
  in.seq_len = 8;
  in.vocab = vocab;
  return in;
}

struct Corpus {
  test::TempDir dir;
  std::string encoding;
  PrepareRequest request(const std::string& out) const {
    PrepareRequest r;
    r.inputs = {(dir.path() / "in").string()};
    r.out_prefix = (dir.path() / out).string();
    r.tokenizer = encoding;
    r.separator = "%";
    r.exclude = {"*.dat"};
    return r;
  }
};

// in/a.txt (two documents split at a "%" line), in/b.jsonl (two), in/sub/c.txt (one), an
// excluded in/a.dat and a link in/link.txt, plus
// `extra_kb` of seeded JSONL in in/d.jsonl.
void fill(Corpus& c, size_t extra_kb = 0) {
  c.encoding = test::write_tiny_encoding(c.dir.path());
  fs::create_directories(c.dir.path() / "in/sub");
  test::write_file(c.dir.path() / "in/a.txt", "The cat sat\n%\nthen the end\n%\n");
  test::write_file(
      c.dir.path() / "in/b.jsonl",
      "{\"text\": \"at the inn\", \"id\": 1}\n\n{\"text\": \"caf\\u00e9 <|endoftext|>\"}\n");
  test::write_file(c.dir.path() / "in/sub/c.txt", "sing  then\n");
  // Left out: a file --exclude names, and a link (Debian's fortunes link each file twice).
  test::write_file(c.dir.path() / "in/a.dat", std::string("\0\x01binary", 8));
  fs::create_symlink("a.txt", c.dir.path() / "in/link.txt");
  if (extra_kb > 0) {
    std::mt19937 rng(7);
    const char* words[] = {"the", "then", "cat", "at", "ending", "in", "a", "sing", "hen"};
    std::ofstream out(c.dir.path() / "in/d.jsonl");
    size_t written = 0;
    while (written < extra_kb * 1024) {
      std::string text;
      for (int w = 0, n = 5 + static_cast<int>(rng() % 60); w < n; ++w) {
        text += std::string(w ? " " : "") + words[rng() % 9];
      }
      out << "{\"text\": \"" << text << "\"}\n";
      written += text.size() + 12;
    }
  }
}

}  // namespace

TEST_CASE("prepare-data: each document's ids then <|endoftext|>, in input order, and an index") {
  Corpus c;
  fill(c);
  const PrepareSummary s = prepare_data(c.request("out/corpus"), nullptr);
  const auto tokenizer = load_tokenizer(c.encoding, "");
  std::vector<uint16_t> expected;
  std::vector<uint64_t> starts{0};
  int64_t text_bytes = 0;
  // a.txt, b.jsonl, sub/c.txt: name order; JSON strings decoded; special text stays text.
  for (const std::string doc : {"The cat sat\n", "then the end\n", "at the inn",
                                "caf\xC3\xA9 <|endoftext|>", "sing  then\n"}) {
    for (const uint32_t id : tokenizer->encode_ordinary(doc))
      expected.push_back(static_cast<uint16_t>(id));
    expected.push_back(300);
    starts.push_back(expected.size());
    text_bytes += static_cast<int64_t>(doc.size());
  }
  CHECK(ids_of(s.tokens_path) == expected);
  const TokenIndex index = read_token_index(s.index_path);
  CHECK(index.tokenizer == "tiny");
  CHECK(index.dtype == "uint16");
  CHECK(index.vocab == 301);
  CHECK(index.eot == 300);
  CHECK(index.documents == 5);
  // The header alone, as a job's ranks read it.
  const TokenIndex header = read_token_index(s.index_path, /*with_starts=*/false);
  CHECK(header.documents == 5);
  CHECK(header.tokens == index.tokens);
  CHECK(header.document_starts.empty());
  CHECK(index.document_starts == starts);
  CHECK(index.text_bytes == text_bytes);
  CHECK(s.progress.documents == 5);
  CHECK(s.progress.tokens == static_cast<int64_t>(expected.size()));
  // Finished: no partial files or journal are left.
  CHECK(!fs::exists(c.dir.path() / "out/corpus.bin.partial"));
  CHECK(!fs::exists(c.dir.path() / "out/corpus.progress.json"));
  CHECK(!fs::exists(c.dir.path() / "out/corpus.docs.partial"));
}

TEST_CASE("prepare-data: the same bytes on 1 and 2 threads and with any unit size") {
  Corpus c;
  fill(c, 300);
  PrepareRequest one = c.request("one");
  one.threads = 1;
  PrepareRequest two = c.request("two");
  two.threads = 2;
  two.unit_bytes = 4096;
  const PrepareSummary a = prepare_data(one, nullptr);
  const PrepareSummary b = prepare_data(two, nullptr);
  CHECK(b.progress.units > 50);
  CHECK(b.threads == 2);
  CHECK(test::read_file(a.tokens_path) == test::read_file(b.tokens_path));
  CHECK(read_token_index(a.index_path).document_starts ==
        read_token_index(b.index_path).document_starts);
}

TEST_CASE(
    "prepare-data: a run stopped after some units resumes to the bytes of one never stopped") {
  Corpus c;
  fill(c, 200);
  PrepareRequest r = c.request("corpus");
  r.unit_bytes = 8192;
  r.threads = 2;
  const PrepareSummary whole = prepare_data(c.request("whole"), nullptr);
  struct Stop {};
  CHECK_THROWS_AS(prepare_data(
                      r,
                      [](const PrepareProgress& p) {
    if (p.units_done == 3) throw Stop{};
                      }),
                  Stop);
  CHECK(fs::exists(c.dir.path() / "corpus.progress.json"));
  CHECK(!fs::exists(c.dir.path() / "corpus.bin"));
  const PrepareSummary resumed = prepare_data(r, nullptr);
  CHECK(resumed.progress.resumed_units == 3);
  CHECK(test::read_file(resumed.tokens_path) == test::read_file(whole.tokens_path));
  CHECK(test::read_file(resumed.index_path).size() > 0);
  CHECK(read_token_index(resumed.index_path).document_starts ==
        read_token_index(whole.index_path).document_starts);

  // Partial tokens cut short since the interruption are not padded back: it starts over (over
  // the finished files above, which it may replace).
  r.overwrite = true;
  CHECK_THROWS_AS(prepare_data(
                      r,
                      [](const PrepareProgress& p) {
    if (p.units_done == 2) throw Stop{};
                      }),
                  Stop);
  fs::resize_file(c.dir.path() / "corpus.bin.partial", 10);
  const PrepareSummary over = prepare_data(r, nullptr);
  CHECK(over.progress.resumed_units == 0);
  CHECK(test::read_file(over.tokens_path) == test::read_file(whole.tokens_path));

  // Inputs changed since the interruption: it starts over rather than mixing the two.
  CHECK_THROWS_AS(prepare_data(
                      r,
                      [](const PrepareProgress& p) {
    if (p.units_done == 2) throw Stop{};
                      }),
                  Stop);
  test::write_file(c.dir.path() / "in/sub/c.txt", "changed\n");
  const PrepareSummary fresh = prepare_data(r, nullptr);
  CHECK(fresh.progress.resumed_units == 0);
  CHECK(test::read_file(fresh.tokens_path) != test::read_file(whole.tokens_path));
}

TEST_CASE("prepare-data: outputs that exist are replaced only with --overwrite") {
  Corpus c;
  fill(c);
  // Another tool's PREFIX.bin / PREFIX.idx (Megatron's pair has these names).
  test::write_file(c.dir.path() / "corpus.bin", "their tokens");
  test::write_file(c.dir.path() / "corpus.idx", "their index");
  PrepareRequest r = c.request("corpus");
  CHECK_THROWS_WITH_AS(prepare_data(r, nullptr),
                       doctest::Contains("corpus.bin' exists and no interrupted preparation"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(prepare_data(r, nullptr), doctest::Contains("pass --overwrite"),
                       ConfigError);
  CHECK(test::read_file(c.dir.path() / "corpus.bin") == "their tokens");
  CHECK(test::read_file(c.dir.path() / "corpus.idx") == "their index");
  // Read as a token index, the other tool's says so and how to keep it.
  CHECK_THROWS_WITH_AS(read_token_index((c.dir.path() / "corpus.idx").string()),
                       doctest::Contains("move it aside"), ConfigError);
  // An index alone is someone's too.
  fs::remove(c.dir.path() / "corpus.bin");
  CHECK_THROWS_WITH_AS(prepare_data(r, nullptr), doctest::Contains("corpus.idx' exists"),
                       ConfigError);
  r.overwrite = true;
  const PrepareSummary s = prepare_data(r, nullptr);
  CHECK(read_token_index(s.index_path).documents == 5);
  // A finished preparation run again is refused as well: its files are someone's by then.
  r.overwrite = false;
  CHECK_THROWS_AS(prepare_data(r, nullptr), ConfigError);
}

TEST_CASE("prepare-data: a second preparation into a prefix another one is writing is refused") {
  Corpus c;
  fill(c);
  const PrepareRequest r = c.request("corpus");
  {
    // The other one's lock, as it holds it while it writes, and names it.
    const zt::ExclusiveFileLock other(r.out_prefix + ".lock");
    REQUIRE(other.held());
    other.record_holder();
    const std::string busy = "another prepare-data (pid " + std::to_string(::getpid()) + " on ";
    const std::string prefix = ") is writing --out " + r.out_prefix;
    CHECK_THROWS_WITH_AS(prepare_data(r, nullptr), doctest::Contains(busy.c_str()), ConfigError);
    CHECK_THROWS_WITH_AS(prepare_data(r, nullptr), doctest::Contains(prefix.c_str()), ConfigError);
    CHECK_FALSE(fs::exists(r.out_prefix + ".bin.partial"));  // nothing of it touched
  }
  CHECK(prepare_data(r, nullptr).progress.documents == 5);  // once it ended, this one runs
}

TEST_CASE("prepare-data: separator lines end in LF or CRLF") {
  Corpus c;
  fill(c);
  fs::remove_all(c.dir.path() / "in");
  fs::create_directories(c.dir.path() / "in");
  test::write_file(c.dir.path() / "in/crlf.txt", "one\r\n%\r\ntwo\r\n%\r\n%\nthree\n");
  PrepareRequest r = c.request("crlf");
  r.unit_bytes = 4;  // units cut at each separator line
  const PrepareSummary s = prepare_data(r, nullptr);
  CHECK(s.progress.documents == 3);
  CHECK(s.progress.units == 3);
}

TEST_CASE("prepare-data: inputs it cannot read as asked are named with their line") {
  Corpus c;
  fill(c);
  test::write_file(c.dir.path() / "in/b.jsonl", "{\"text\": \"ok\"}\n{\"text\": 3}\n");
  CHECK_THROWS_WITH_AS(prepare_data(c.request("x"), nullptr),
                       doctest::Contains("b.jsonl:2: field 'text' is number, not a string of "
                                         "text; fix that line"),
                       ConfigError);
  test::write_file(c.dir.path() / "in/b.jsonl", "{\"text\": \"ok\"}\n{\"body\": \"x\"}\n");
  CHECK_THROWS_WITH_AS(prepare_data(c.request("x"), nullptr),
                       doctest::Contains("b.jsonl:2: no field 'text'; name the field that holds "
                                         "the text with --field"),
                       ConfigError);
  test::write_file(c.dir.path() / "in/b.jsonl", "{\"text\": \"ok\"}\n\n{broken\n");
  CHECK_THROWS_WITH_AS(prepare_data(c.request("x"), nullptr),
                       doctest::Contains("b.jsonl:3: not a JSON line"), ConfigError);
  // Compressed corpora (*.jsonl.zst, *.txt.gz) are not text: refused by their magic bytes.
  test::write_file(c.dir.path() / "in/b.jsonl", "{\"text\": \"ok\"}\n");
  test::write_file(c.dir.path() / "in/e.jsonl.gz", std::string("\x1f\x8b\x08\x00rest", 8));
  CHECK_THROWS_WITH_AS(prepare_data(c.request("x"), nullptr),
                       doctest::Contains("e.jsonl.gz' is gzip-compressed, not UTF-8 text"),
                       ConfigError);
  fs::remove(c.dir.path() / "in/e.jsonl.gz");
  test::write_file(c.dir.path() / "in/e.zst", std::string("\x28\xb5\x2f\xfd\x00\x00", 6));
  CHECK_THROWS_WITH_AS(prepare_data(c.request("x"), nullptr), doctest::Contains("zstd-compressed"),
                       ConfigError);
  fs::remove(c.dir.path() / "in/e.zst");
  // Nor are archives and UTF-16 (its every other byte a NUL).
  test::write_file(c.dir.path() / "in/e.zip", std::string("PK\x03\x04rest", 8));
  CHECK_THROWS_WITH_AS(prepare_data(c.request("x"), nullptr),
                       doctest::Contains("e.zip' is a zip archive, not UTF-8 text"), ConfigError);
  fs::remove(c.dir.path() / "in/e.zip");
  test::write_file(c.dir.path() / "in/e.txt", std::string("\xff\xfeh\0i\0", 6));
  CHECK_THROWS_WITH_AS(prepare_data(c.request("x"), nullptr),
                       doctest::Contains("e.txt' is UTF-16 text, not UTF-8 text; convert it first"),
                       ConfigError);
  // Text that merely starts like bzip2's magic is text.
  test::write_file(c.dir.path() / "in/e.txt", "BZh is not a word\n");
  CHECK_NOTHROW(prepare_data(c.request("y"), nullptr));
  PrepareRequest missing = c.request("x");
  missing.inputs = {(c.dir.path() / "nowhere").string()};
  CHECK_THROWS_WITH_AS(prepare_data(missing, nullptr), doctest::Contains("nowhere' does not exist"),
                       ConfigError);
}

TEST_CASE("prepare-data: a folder's hidden entries and the folders --exclude names are not "
          "read, a binary file is refused, and a null text is no document") {
  Corpus c;
  fill(c);
  const size_t documents = prepare_data(c.request("base"), nullptr).progress.documents;
  // A repository's objects (zlib), its index ("DIRC", NULs), a hidden file: left out unasked.
  fs::create_directories(c.dir.path() / "in/.git/objects/ab");
  test::write_file(c.dir.path() / "in/.git/objects/ab/cdef", std::string("\x78\x01\x2b\x49", 4));
  test::write_file(c.dir.path() / "in/.git/index", std::string("DIRC\0\0\0\2", 8));
  test::write_file(c.dir.path() / "in/.gitignore", "*.o\n");
  CHECK(prepare_data(c.request("hidden"), nullptr).progress.documents == documents);
  // A binary file (a NUL near its start) found in a folder is left out, named on stderr; one
  // named as an input is refused. --exclude of its folder leaves the folder out (before, only
  // files' own names were matched).
  fs::create_directories(c.dir.path() / "in/build");
  const std::string elf("\x7f"
                        "ELF\x02\x01\x01\0",
                        8);
  test::write_file(c.dir.path() / "in/build/main.o", elf);
  test::write_file(c.dir.path() / "in/build/notes.txt", "built by hand\n");
  CHECK(prepare_data(c.request("binary"), nullptr).progress.documents == documents + 1);
  PrepareRequest named = c.request("named");
  named.inputs = {(c.dir.path() / "in/build/main.o").string()};
  CHECK_THROWS_WITH_AS(prepare_data(named, nullptr),
                       doctest::Contains("main.o' holds a NUL byte at offset 7: a binary file, "
                                         "not UTF-8 text; give text files"),
                       ConfigError);
  PrepareRequest only_binary = c.request("only");
  only_binary.inputs = {(c.dir.path() / "in/build").string()};
  only_binary.exclude = {"*.txt"};
  CHECK_THROWS_WITH_AS(prepare_data(only_binary, nullptr),
                       doctest::Contains("hold no text files: every file found is binary"),
                       ConfigError);
  PrepareRequest without_build = c.request("nobuild");
  without_build.exclude.push_back("build");
  CHECK(prepare_data(without_build, nullptr).progress.documents == documents);
  fs::remove_all(c.dir.path() / "in/build");
  // Another, interrupted preparation's files: refused, not read as text.
  test::write_file(c.dir.path() / "in/old.docs.partial", "0123");
  CHECK_THROWS_WITH_AS(prepare_data(c.request("x"), nullptr),
                       doctest::Contains("old.docs.partial' is a file of another, interrupted "
                                         "trainer prepare-data"),
                       ConfigError);
  fs::remove(c.dir.path() / "in/old.docs.partial");
  // A finished preparation in the folder: with its .bin and .idx left out, its PREFIX.lock (the
  // holder's pid and host) is refused, not read as a document; left out too, nothing of it is
  // read. A .lock of the user's own, beside no preparation, is text like any other file.
  PrepareRequest inside = c.request("in/prep/v1");
  REQUIRE(prepare_data(inside, nullptr).progress.documents == documents);
  REQUIRE(fs::exists(c.dir.path() / "in/prep/v1.lock"));
  PrepareRequest beside = c.request("again");
  beside.exclude.insert(beside.exclude.end(), {"*.bin", "*.idx"});
  CHECK_THROWS_WITH_AS(prepare_data(beside, nullptr),
                       doctest::Contains("v1.lock' is the lock file of another trainer "
                                         "prepare-data (--out "),
                       ConfigError);
  beside.exclude.push_back("*.lock");
  CHECK(prepare_data(beside, nullptr).progress.documents == documents);
  fs::remove_all(c.dir.path() / "in/prep");
  test::write_file(c.dir.path() / "in/todo.lock", "buy more disks\n");
  CHECK(prepare_data(c.request("own_lock"), nullptr).progress.documents == documents + 1);
  fs::remove(c.dir.path() / "in/todo.lock");
  // A null text is an empty document: none, as an empty string is.
  test::write_file(c.dir.path() / "in/n.jsonl", "{\"text\": null}\n{\"text\": \"ab\"}\n");
  CHECK(prepare_data(c.request("nulls"), nullptr).progress.documents == documents + 1);
  fs::remove(c.dir.path() / "in/n.jsonl");
  // A .json of JSON Lines whose first line has an escaped half of a surrogate pair (Python's
  // json.dumps writes it) is JSONL: before, the whole file was one document of keys and quotes.
  test::write_file(c.dir.path() / "in/s.json", "{\"text\": \"a\\ud800b\"}\n{\"text\": \"cd\"}\n");
  CHECK(prepare_data(c.request("surrogate"), nullptr).progress.documents == documents + 2);
  fs::remove(c.dir.path() / "in/s.json");
  // Nothing left to read: the inputs and the rules are named.
  PrepareRequest none = c.request("none");
  none.exclude = {"*"};
  CHECK_THROWS_WITH_AS(prepare_data(none, nullptr),
                       doctest::Contains("hold no files to read: below a folder, hidden entries, "
                                         "links and what --exclude names are left out"),
                       ConfigError);
}

TEST_CASE("prepare-data: an earlier preparation in an input folder is no text to encode") {
  Corpus c;
  fill(c);
  REQUIRE_NOTHROW(prepare_data(c.request("in/old"), nullptr));
  // Prepared again, with its own outputs in the folder: those are left out, as before.
  PrepareRequest again = c.request("in/old");
  again.overwrite = true;
  CHECK(prepare_data(again, nullptr).progress.documents == 5);
  // The same with the folder's entries named one by one, as a shell expands `in/*`: its own
  // outputs and what --exclude names (in/a.dat) are left out as in a folder, where they were
  // read (a resume of `prepare-data in/* --out in/old` was refused by its own partial files).
  PrepareRequest globbed = again;
  globbed.inputs.clear();
  for (const auto& e : fs::directory_iterator(c.dir.path() / "in")) {
    if (!e.is_symlink()) globbed.inputs.push_back(e.path().string());
  }
  std::sort(globbed.inputs.begin(), globbed.inputs.end());
  test::write_file(c.dir.path() / "in/old.bin.partial", "stale partial bytes");
  CHECK(prepare_data(globbed, nullptr).progress.documents == 5);
  // Into another prefix, the first one's files are inputs: each is refused, not read as text.
  try {
    prepare_data(c.request("new"), nullptr);
    FAIL("an earlier preparation's files were encoded as text");
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK((contains_text(what, "old.bin' is the token file of an earlier preparation") ||
           contains_text(what, "old.idx' is a token index")));
  }
  PrepareRequest left_out = c.request("new");
  left_out.exclude = {"*.dat", "old.*"};
  CHECK(prepare_data(left_out, nullptr).progress.documents == 5);
}

TEST_CASE("prepare-data: an output folder it cannot make, or an index it cannot write, is an "
          "I/O error, and no token file is left as if finished") {
  Corpus c;
  fill(c);
  test::write_file(c.dir.path() / "afile", "x");
  CHECK_THROWS_WITH_AS(prepare_data(c.request("afile/sub/corpus"), nullptr),
                       doctest::Contains("cannot create the folder"), IoError);
  // The index's temporary file cannot be made: the tokens keep their partial name, and a job
  // finds no PREFIX.bin to take for a bare token file.
  fs::create_directories(c.dir.path() / "out/corpus.idx.tmp");
  CHECK_THROWS_WITH_AS(prepare_data(c.request("out/corpus"), nullptr),
                       doctest::Contains("corpus.idx.tmp': Is a directory"), IoError);
  CHECK(fs::is_directory(c.dir.path() / "out/corpus.idx.tmp"));  // not this write's to remove
  CHECK_FALSE(fs::exists(c.dir.path() / "out/corpus.bin"));
  CHECK_FALSE(fs::exists(c.dir.path() / "out/corpus.idx"));
  // Once it can, the same command finishes the preparation.
  fs::remove(c.dir.path() / "out/corpus.idx.tmp");
  CHECK(prepare_data(c.request("out/corpus"), nullptr).progress.documents == 5);
  CHECK(fs::exists(c.dir.path() / "out/corpus.bin"));
}

TEST_CASE("prepare-data: .ndjson is JSONL too, and an empty text is no document") {
  Corpus c;
  fill(c);
  const PrepareSummary jsonl = prepare_data(c.request("jsonl"), nullptr);
  // The same lines in a .NDJSON file, with empty texts among them.
  fs::rename(c.dir.path() / "in/b.jsonl", c.dir.path() / "in/b.NDJSON");
  test::write_file(c.dir.path() / "in/b.NDJSON",
                   "{\"text\": \"at the inn\", \"id\": 1}\n{\"text\": \"\"}\n\n"
                   "{\"text\": \"caf\\u00e9 <|endoftext|>\"}\n{\"text\": \"\"}\n");
  const PrepareSummary ndjson = prepare_data(c.request("ndjson"), nullptr);
  CHECK(ndjson.progress.documents == 5);
  CHECK(test::read_file(ndjson.tokens_path) == test::read_file(jsonl.tokens_path));
}

TEST_CASE("prepare-data: a .json file of JSON Lines is JSONL; another .json is text") {
  Corpus c;
  fill(c);
  const PrepareSummary jsonl = prepare_data(c.request("jsonl"), nullptr);
  // Megatron's "loose json" and Hugging Face's to_json() name JSON Lines .json.
  fs::rename(c.dir.path() / "in/b.jsonl", c.dir.path() / "in/b.json");
  const PrepareSummary loose = prepare_data(c.request("loose"), nullptr);
  CHECK(loose.progress.documents == jsonl.progress.documents);
  CHECK(test::read_file(loose.tokens_path) == test::read_file(jsonl.tokens_path));
  // With a UTF-8 byte order mark first (as Windows tools write it), still JSON Lines.
  test::write_file(c.dir.path() / "in/b.json",
                   "\xEF\xBB\xBF" + test::read_file(c.dir.path() / "in/b.json"));
  const PrepareSummary marked = prepare_data(c.request("marked"), nullptr);
  CHECK(marked.progress.documents == jsonl.progress.documents);
  CHECK(test::read_file(marked.tokens_path) == test::read_file(jsonl.tokens_path));
  // A .json that is one array (alpaca_data.json, to_json(lines=False)) is refused: read as text
  // it trained on its brackets, keys and escapes as one document.
  test::write_file(c.dir.path() / "in/b.json", "\n  [{\"text\": \"at\"}, {\"text\": \"the\"}]\n");
  CHECK_THROWS_WITH_AS(prepare_data(c.request("array"), nullptr),
                       doctest::Contains("b.json' is one JSON array, not JSON Lines"),
                       zt::ConfigError);
}

TEST_CASE("prepare-data: inputs with text but no document are refused, leaving no output") {
  Corpus c;
  fill(c);
  fs::remove_all(c.dir.path() / "in");
  fs::create_directories(c.dir.path() / "in");
  test::write_file(c.dir.path() / "in/b.jsonl", "{\"text\": \"\"}\n\n{\"text\": \"\"}\n");
  const PrepareRequest r = c.request("empty");
  CHECK_THROWS_WITH_AS(prepare_data(r, nullptr), doctest::Contains("the inputs hold no document"),
                       ConfigError);
  for (const char* ext : {".bin", ".idx", ".bin.partial", ".docs.partial", ".progress.json"})
    CHECK_FALSE(fs::exists(r.out_prefix + ext));
}

TEST_CASE("prepare-data: JSONL lines with bytes that are not UTF-8 or half a surrogate pair") {
  Corpus c;
  fill(c);
  // What Python's json.dumps writes for a lone surrogate, a raw 0xFF byte, and a whole pair:
  // all read (U+FFFD for the broken ones), as a text file's bytes are.
  test::write_file(c.dir.path() / "in/b.jsonl",
                   "{\"text\": \"a\\ud800b\"}\n{\"text\": \"c\xFF d\"}\n"
                   "{\"text\": \"e\\ud83d\\ude00 \\\\ud800\"}\n{\"text\": \"x\\udc00\"}\n"
                   "{\"text\": \"fine\", \"meta\": \"\xFF\"}\n");
  const PrepareSummary broken = prepare_data(c.request("broken"), nullptr);
  // Counted for the run's warning as a text file's are: the three whose text was repaired (a
  // repair in another field changes no document).
  CHECK(broken.repaired_documents == 3);
  CHECK(broken.first_repaired == (c.dir.path() / "in/b.jsonl").string());
  // The same documents written with U+FFFD by hand give the same tokens.
  test::write_file(c.dir.path() / "in/b.jsonl",
                   "{\"text\": \"a\\ufffdb\"}\n{\"text\": \"c\xEF\xBF\xBD d\"}\n"
                   "{\"text\": \"e\\ud83d\\ude00 \\\\ud800\"}\n{\"text\": \"x\\ufffd\"}\n"
                   "{\"text\": \"fine\", \"meta\": \"ok\"}\n");
  const PrepareSummary fixed = prepare_data(c.request("fixed"), nullptr);
  CHECK(fixed.repaired_documents == 0);
  CHECK(test::read_file(broken.tokens_path) == test::read_file(fixed.tokens_path));
  // Still not JSON: refused, with the line.
  test::write_file(c.dir.path() / "in/b.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"\xFF\n");
  CHECK_THROWS_WITH_AS(prepare_data(c.request("x"), nullptr),
                       doctest::Contains("b.jsonl:2: not a JSON line"), ConfigError);
}

TEST_CASE("prepare-data: --out inside an input folder leaves its own files out of the inputs") {
  Corpus c;
  fill(c, 10);
  const PrepareSummary outside = prepare_data(c.request("outside"), nullptr);
  // `prepare-data in/ --out in/corpus`, twice: the second run must not read the first's .bin,
  // .idx (or a partial file of its own), so both give the bytes of a run whose output is elsewhere.
  PrepareRequest inside = c.request("in/corpus");
  const PrepareSummary first = prepare_data(inside, nullptr);
  test::write_file(c.dir.path() / "in/corpus.bin.partial", "stale partial bytes");
  inside.overwrite = true;
  const PrepareSummary second = prepare_data(inside, nullptr);
  CHECK(test::read_file(first.tokens_path) == test::read_file(outside.tokens_path));
  CHECK(test::read_file(second.tokens_path) == test::read_file(outside.tokens_path));
  // Another prefix's files in the folder are inputs like any other.
  CHECK(is_prepare_output(c.dir.path() / "in/corpus.idx", inside.out_prefix));
  CHECK_FALSE(is_prepare_output(c.dir.path() / "in/corpusx.idx", inside.out_prefix));
  CHECK_FALSE(is_prepare_output(c.dir.path() / "in/corpus.txt", inside.out_prefix));
}

TEST_CASE("prepare-data: a text file of 4 GiB without --separator is refused before any work") {
  Corpus c;
  fill(c);
  // Sparse: 4 GiB of size, no blocks but its first 8 KiB of text (a NUL there is a binary file).
  const fs::path big = c.dir.path() / "in/big.txt";
  { std::ofstream(big) << std::string(8192, 'x'); }
  fs::resize_file(big, uint64_t{1} << 32);
  PrepareRequest r = c.request("x");
  r.separator.clear();
  CHECK_THROWS_WITH_AS(prepare_data(r, nullptr),
                       doctest::Contains("big.txt is 4294967296 bytes, one document"), ConfigError);
  CHECK_THROWS_WITH_AS(prepare_data(r, nullptr), doctest::Contains("--separator LINE"),
                       ConfigError);
  CHECK_FALSE(fs::exists(c.dir.path() / "x.bin.partial"));
}

TEST_CASE("prepare-data: a rank file's path names the tokenizer in a job, and a blend shares one") {
  Corpus c;
  fill(c, 10);
  const PrepareSummary a = prepare_data(c.request("a"), nullptr);
  trainer::DataSettings d = tokens_at(a.tokens_path);
  d.tokenizer = c.encoding;  // the path prepare-data was given
  const ModelInputs in = gpt_inputs(320);
  CHECK_NOTHROW(make_data(d, in, "gpt"));
  d.tokenizer.clear();  // the index says where the tokenizer came from
  const auto tokenizer = run_tokenizer(d);
  REQUIRE(tokenizer != nullptr);
  CHECK(tokenizer->name() == "tiny");
  // Recorded as an absolute path: sample and eval find it from any folder.
  CHECK(fs::path(read_token_index(index_path_for(a.tokens_path)).tokenizer_source).is_absolute());
  // A recorded file gone: the error names the index it came from and the way out.
  PrepareRequest moved = c.request("moved");
  fs::create_directories(c.dir.path() / "gone");
  moved.tokenizer = (c.dir.path() / "gone" / fs::path(c.encoding).filename()).string();
  fs::copy_file(c.encoding, moved.tokenizer);
  const PrepareSummary m = prepare_data(moved, nullptr);
  fs::remove(moved.tokenizer);
  trainer::DataSettings dm = tokens_at(m.tokens_path);
  CHECK_THROWS_WITH_AS(run_tokenizer(dm), doctest::Contains("moved.idx, which prepare-data wrote"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(run_tokenizer(dm), doctest::Contains("set data.tokenizer"), ConfigError);
  // One data.tokenizer names that cannot load is named with its place.
  dm.tokenizer = "cl100k";
  dm.tokenizer_where = "job.toml:6:1";
  CHECK_THROWS_WITH_AS(run_tokenizer(dm),
                       doctest::Contains("data.tokenizer = \"cl100k\" (job.toml:6:1): "),
                       ConfigError);

  // A second file made with another encoding of the same size cannot join the blend.
  PrepareRequest other = c.request("b");
  other.tokenizer = test::write_tiny_encoding(c.dir.path(), "other", "ere");
  const PrepareSummary b = prepare_data(other, nullptr);
  d.path.clear();
  d.paths = {a.tokens_path, b.tokens_path};
  CHECK_THROWS_WITH_AS(make_data(d, in, "gpt"), doctest::Contains("must share a tokenizer"),
                       ConfigError);
}

TEST_CASE("prepare-data: the data source reads a prepared file and refuses one that disagrees") {
  Corpus c;
  fill(c, 20);
  const PrepareSummary s = prepare_data(c.request("corpus"), nullptr);
  trainer::DataSettings d = tokens_at(s.tokens_path);
  d.element_size = 4;  // the default would be wrong; the index decides while token_dtype is unset
  ModelInputs in = gpt_inputs(320);
  const auto source = make_data(d, in, "gpt");
  const Batch b = source->get_samples(0, 2);
  CHECK(b.input.max().item<int64_t>() <= 300);
  CHECK(b.input.size(1) == 8);
  // Read as text, its ids' bytes would train (each below 256): refused, naming the way out.
  trainer::DataSettings as_text = d;
  as_text.kind = "text";
  as_text.kind_where = "job.toml:3:8";
  CHECK_THROWS_WITH_AS(make_data(as_text, gpt_inputs(320), "gpt"),
                       doctest::Contains("is a prepared token file"), ConfigError);
  CHECK_THROWS_WITH_AS(make_data(as_text, gpt_inputs(320), "gpt"),
                       doctest::Contains("data.kind is \"text\" (job.toml:3:8): set data.kind = "
                                         "\"tokens\""),
                       ConfigError);

  in.vocab = 256;
  CHECK_THROWS_WITH_AS(make_data(d, in, "gpt"), doctest::Contains("was made with tokenizer 'tiny'"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(make_data(d, in, "gpt"),
                       doctest::Contains("set model.vocab to at least 301"), ConfigError);
  in.vocab = 320;
  d.tokenizer = "gpt2";
  d.tokenizer_where = "job.toml:5:1";
  CHECK_THROWS_WITH_AS(make_data(d, in, "gpt"),
                       doctest::Contains("but data.tokenizer is 'gpt2' (job.toml:5:1)"),
                       ConfigError);
  d.tokenizer = "tiny";
  d.token_dtype_set = true;
  CHECK_THROWS_WITH_AS(make_data(d, in, "gpt"), doctest::Contains("remove data.token_dtype"),
                       ConfigError);
  d.token_dtype_set = false;
  // A bare token file (no index) with ids past 16 bits: data.token_dtype must say its width.
  const fs::path bare = c.dir.path() / "bare.bin";
  fs::copy_file(s.tokens_path, bare);
  trainer::DataSettings db = tokens_at(bare.string());
  db.element_size = 2;
  ModelInputs wide = gpt_inputs(100352);
  CHECK_THROWS_WITH_AS(make_data(db, wide, "gpt"),
                       doctest::Contains("set data.token_dtype = \"uint32\""), ConfigError);
  db.token_dtype_set = true;  // said, uint16 or not: read as told
  CHECK_NOTHROW(make_data(db, wide, "gpt"));
  CHECK_NOTHROW(make_data(tokens_at(bare.string()), gpt_inputs(320), "gpt"));
  // A missing val_path names its own key.
  d.val_path = (c.dir.path() / "missing.bin").string();
  d.val_path_where = "job.toml:9:1";
  d.val_fraction = 0;
  CHECK_THROWS_WITH_AS(make_val_data(d, in, "gpt", 2), doctest::Contains("check data.val_path"),
                       IoError);
  d.val_path.clear();
  // An index cut short while it was written (its first 16 bytes incomplete) is said to be one,
  // not taken for another tool's.
  const std::string whole_index = test::read_file(s.index_path);
  for (const size_t kept : {size_t{0}, size_t{5}, size_t{12}}) {
    CAPTURE(kept);
    test::write_file(s.index_path, whole_index.substr(0, kept));
    CHECK_THROWS_WITH_AS(make_data(d, in, "gpt"),
                         doctest::Contains("cut short in its first 16 bytes"), ConfigError);
  }
  // A damaged header is checked against the file's length before it sizes anything: 2^39
  // documents would have been a 4 TiB table (std::bad_alloc, or the machine's memory).
  test::write_file(s.index_path, whole_index);
  TokenIndex damaged = read_token_index(s.index_path);
  damaged.documents = int64_t{1} << 39;
  write_token_index(s.index_path, damaged);
  for (const bool with_starts : {true, false}) {
    CAPTURE(with_starts);
    CHECK_THROWS_WITH_AS(read_token_index(s.index_path, with_starts),
                         doctest::Contains("cut short in its document starts"), ConfigError);
  }
  CHECK_THROWS_WITH_AS(make_data(d, in, "gpt"),
                       doctest::Contains("run trainer prepare-data again with --overwrite"),
                       ConfigError);
  test::write_file(s.index_path, whole_index + std::string(8, '\0'));
  CHECK_THROWS_WITH_AS(read_token_index(s.index_path),
                       doctest::Contains("longer than its document starts"), ConfigError);
  test::write_file(s.index_path, whole_index);
  damaged = read_token_index(s.index_path);
  damaged.eot = damaged.vocab;
  write_token_index(s.index_path, damaged);
  CHECK_THROWS_WITH_AS(read_token_index(s.index_path), doctest::Contains("cannot all be true"),
                       ConfigError);
  // A token count whose bytes overflow 64 bits (4 x 2^62), read without the starts as a data
  // source reads it: refused, not multiplied.
  test::write_file(s.index_path, whole_index);
  damaged = read_token_index(s.index_path);
  damaged.tokens = int64_t{1} << 62;
  write_token_index(s.index_path, damaged);
  CHECK_THROWS_WITH_AS(read_token_index(s.index_path, false),
                       doctest::Contains("cannot all be true"), ConfigError);
  test::write_file(s.index_path, whole_index);
  test::write_file(s.tokens_path, "abcd");
  CHECK_THROWS_WITH_AS(make_data(d, in, "gpt"),
                       doctest::Contains("not from the same run of prepare-data"), ConfigError);
}

// A prepared file of documents whose ids tell them apart: document d (1, 2, ...) is `lengths[d-1]`
// tokens of id d, then <|endoftext|> = 0, with the index prepare-data would write.
std::string write_documents(const test::TempDir& dir, const std::string& name,
                            const std::vector<int64_t>& lengths) {
  std::vector<uint16_t> ids;
  TokenIndex index;
  index.tokenizer = index.tokenizer_source = "tiny";
  index.fingerprint = "0123456789abcdef";
  index.vocab = 64;
  index.dtype = "uint16";
  index.eot = 0;
  index.documents = static_cast<int64_t>(lengths.size());
  for (size_t d = 0; d < lengths.size(); ++d) {
    index.document_starts.push_back(ids.size());
    ids.insert(ids.end(), static_cast<size_t>(lengths[d]), static_cast<uint16_t>(d + 1));
    ids.push_back(0);
  }
  index.document_starts.push_back(ids.size());
  index.tokens = static_cast<int64_t>(ids.size());
  const std::string path = (dir.path() / name).string();
  test::write_file(path, std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
  write_token_index(index_path_for(path), index);
  return path;
}

bool only(const at::Tensor& ids, std::initializer_list<int64_t> allowed) {
  at::Tensor ok = at::zeros_like(ids, at::kBool);
  for (const int64_t id : allowed) ok |= ids.eq(id);
  return ok.all().item<bool>();
}

TEST_CASE("prepare-data: val_fraction holds out whole documents, from the start nearest its "
          "share") {
  test::TempDir dir;
  // 1003 tokens: a quarter held out would start at token 753, inside document 2 (tokens 501 to
  // 801); the nearest document start is document 3's, at 802 (501 is 252 tokens away).
  trainer::DataSettings d = tokens_at(write_documents(dir, "three.bin", {500, 300, 200}));
  d.val_fraction = 0.25;
  const auto train = make_data(d, gpt_inputs(64), "gpt");
  const auto val = make_val_data(d, gpt_inputs(64), "gpt", 4);
  const Batch t = train->get_samples(0, 3000);
  CHECK(only(t.input, {0, 1, 2}));
  CHECK(only(t.target, {0, 1, 2}));
  CHECK(t.target.eq(2).any().item<bool>());  // document 2 is trained on, all of it
  const Batch v = val->get_samples(0, 1000);
  CHECK(only(v.input, {0, 3}));
  CHECK(only(v.target, {0, 3}));
  CHECK(contains_text(val->describe(), "from token 802 (20.0% of the file), a document's start"));
  CHECK(val->held_out_split().where == "token 802 of 1003, a document's start");
  CHECK(val->held_out_split().at_document);
  CHECK(train->held_out_split().where == val->held_out_split().where);
  // The index's search itself: the nearest start within [lo, hi], the earlier on a tie.
  const std::string idx = index_path_for(d.path);
  const TokenIndex header = read_token_index(idx, /*with_starts=*/false);
  CHECK(nearest_document_start(idx, header, 753, 0, 1003) == 802);
  CHECK(nearest_document_start(idx, header, 651, 0, 1003) == 501);  // 150 before, 151 after
  CHECK(nearest_document_start(idx, header, 753, 0, 790) == 501);
  CHECK(nearest_document_start(idx, header, 753, 803, 1002) == -1);
  CHECK(nearest_document_start(idx, header, 0, 0, 0) == 0);
  CHECK(contains_text(val->describe(), ": 201 tokens"));
  CHECK(contains_text(train->describe(), "the part before data.val_fraction's, from token 802"));

  // The earlier start on a tie: tokens 0-9 and 10-19 are two documents of 9 + <|endoftext|>;
  // the third starts at 20; 30 tokens with a share of 0.5 start the tail at 15, 5 from either.
  d = tokens_at(write_documents(dir, "tie.bin", {9, 9, 9}));
  d.val_fraction = 0.5;
  CHECK(contains_text(make_val_data(d, gpt_inputs(64), "gpt", 1)->describe(), "from token 10 ("));

  // One document: no start inside it, so the parts meet at the share's token, and say so.
  d = tokens_at(write_documents(dir, "one.bin", {1000}));
  d.val_fraction = 0.1;
  const auto one = make_val_data(d, gpt_inputs(64), "gpt", 1);
  CHECK(contains_text(one->describe(), "from token 901 (10.0% of the file), inside a document"));
  CHECK(one->held_out_split().where == "token 901 of 1001");
  CHECK_FALSE(one->held_out_split().at_document);
  CHECK(only(one->get_samples(0, 200).input, {1}));

  // A start further than half the share from its token is not taken: 1% of documents of 600 and
  // 400 tokens (1002 with their ends) starts at 992; document 2's start (601) would hold out 40%.
  d = tokens_at(write_documents(dir, "far.bin", {600, 400}));
  d.val_fraction = 0.01;
  CHECK(contains_text(make_val_data(d, gpt_inputs(64), "gpt", 1)->describe(),
                      "from token 992 (1.0% of the file), inside a document"));
  // Nor one that would leave the held-out part less than a sample (seq_len + 1 = 9 tokens): the
  // share's own token split then holds too few, and says so, as before.
  d = tokens_at(write_documents(dir, "short_tail.bin", {80, 10, 3}));
  d.val_fraction = 0.05;
  CHECK_THROWS_WITH_AS(
      make_val_data(d, gpt_inputs(64), "gpt", 1),
      doctest::Contains("held-out part, from token 92 (4.2% of the file), inside a document"),
      ConfigError);
}

}  // namespace zt::data

namespace zt::data {

TEST_CASE("blend: each sample is one file's, drawn with the weights' odds, the same however read") {
  Corpus c;
  fill(c, 20);
  // Two files whose ids cannot be confused: a prepared one (ids up to 300) and high.bin, a bare
  // file of uint16 tokens whose every id is 0x7801 (bytes 01 78: no text, which is refused).
  const PrepareSummary a = prepare_data(c.request("a"), nullptr);
  std::string high_ids;
  for (int i = 0; i < 2048; ++i) high_ids += "\x01\x78";
  test::write_file(c.dir.path() / "high.bin", high_ids);
  trainer::DataSettings d;
  d.kind = "tokens";
  d.paths = {a.tokens_path, (c.dir.path() / "high.bin").string()};
  d.paths_where = "job.toml:4:1";
  d.weights = {0.7, 0.3};
  d.micro_batch = 4;
  d.grad_accum = 2;
  d.element_size = 2;
  d.seed = 11;
  const ModelInputs in = gpt_inputs(32768);  // high.bin's ids are 0x7801
  const auto blend = make_data(d, in, "gpt");
  const int64_t n = 2000;
  const Batch all = blend->get_samples(0, n);
  // A window of high.bin holds nothing but 0x7801.
  int64_t from_high = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool high = all.input[i].eq(0x7801).all().item<bool>();
    from_high += high ? 1 : 0;
    CHECK((high || all.input[i].lt(0x7801).all().item<bool>()));
  }
  // 600 expected; 4.5 standard deviations (sqrt(2000 x 0.3 x 0.7) = 20.5) either side.
  CHECK(from_high > 508);
  CHECK(from_high < 692);
  // Stateless: a slice read alone equals the same samples read in one go, and a rank's share at
  // world 2 is the single-process batch's slice.
  const Batch middle = blend->get_samples(777, 9);
  CHECK(at::equal(middle.input, all.input.narrow(0, 777, 9)));
  CHECK(at::equal(blend->get(40, 1, 1, 2).input,
                  blend->global_batch(40, 1, 2).input.narrow(0, 4, 4)));
  CHECK(contains_text(blend->describe(), "a blend of 2 files"));
}

TEST_CASE("blend: the config refuses a blend with data.path, mismatched weights or no weight") {
  for (const auto& [toml, message] : std::vector<std::pair<std::string, std::string>>{
           {"path = \"a\"\npaths = [\"a\", \"b\"]", "both name the training data"},
           {"paths = [\"a\", \"b\"]\nweights = [1.0]", "data.weights has 1 entries for the 2"},
           {"paths = [\"a\", \"b\"]\nweights = [0.0, 0.0]", "some above 0"}}) {
    CAPTURE(toml);
    CHECK_THROWS_WITH_AS(
        trainer::load_config_string("[run]\ntask = \"smoke\"\n[plugins]\ncomm = \"\"\n[data]\n"
                                    "kind = \"tokens\"\n" +
                                        toml,
                                    "job.toml", {}),
        doctest::Contains(message.c_str()), ConfigError);
  }
}

TEST_CASE("prepare-data: documents that are not UTF-8 are counted and the first named; a file "
          "name that is not UTF-8 prepares") {
  Corpus c;
  fill(c);
  // cp1252's "café" twice in one document, and a file whose name is Latin-1 ("résumé.txt").
  test::write_file(c.dir.path() / "in/latin.txt", "caf\xE9 and caf\xE9\n");
  const fs::path odd_name = c.dir.path() / "in/r\xE9sum\xE9.txt";
  test::write_file(odd_name, "the end\n");
  const PrepareSummary s = prepare_data(c.request("out"), nullptr);
  CHECK(s.repaired_documents == 1);
  CHECK(s.first_repaired == (c.dir.path() / "in/latin.txt").string());
  // The Latin-1 name went into the journal's key (escaped: JSON holds UTF-8 only) without the
  // internal error the strict JSON dump gave.
  CHECK(s.progress.documents == 7);
  fs::remove(odd_name);
  const PrepareSummary clean = prepare_data(c.request("clean"), nullptr);
  CHECK(clean.repaired_documents == 1);
  fs::remove(c.dir.path() / "in/latin.txt");
  CHECK(prepare_data(c.request("none"), nullptr).repaired_documents == 0);
}

}  // namespace zt::data
