// The pipeline: plan units over the inputs, encode them on worker threads (at most two units per
// worker ahead of the writer, so memory stays bounded), write them in order, sync, journal.
#include "data/prepare_data.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "data/bpe_tokenizer.h"
#include "data/mapped_file.h"
#include "data/token_index.h"
#include "data/tokenizer_files.h"
#include "zt/error.h"
#include "zt/file_lock.h"
#include "zt/host/process_cpus.h"
#include "zt/host/utf8.h"

namespace zt::data {

namespace {

namespace fs = std::filesystem;

// Files are mapped only while a plan or a unit reads them: a folder of many thousands of files
// must not hold a mapping each (the kernel caps a process's mappings, 65530 by default).
struct InputFile {
  std::string path;
  bool jsonl = false;
  uint64_t size = 0;
};

MappedFile map_input(const InputFile& f) {
  return MappedFile(f.path, "input file '" + f.path + "'", "the prepare-data inputs");
}

// Bytes [begin, end) of one input file: whole documents.
struct Range {
  size_t file;
  size_t begin, end;
};

struct Unit {
  std::vector<Range> ranges;
  int64_t bytes = 0;
};

struct UnitResult {
  std::vector<uint32_t> ids;
  std::vector<uint64_t> doc_tokens;  // each document's token count, <|endoftext|> included
  int64_t text_bytes = 0;
  int64_t repaired_documents = 0;  // documents with bytes that are not UTF-8 (read as U+FFFD)
  std::string first_repaired;      // the input of the first of them
  std::exception_ptr error;
};

std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

// A JSON line that nlohmann refused, repaired as text files are: bytes that are not UTF-8 become
// U+FFFD, and so does an escape of half a surrogate pair ("\ud800" alone), which Python's
// json.dumps writes and its json and tiktoken read.
std::string repaired_json_line(std::string_view line) {
  const std::string text = replace_invalid_utf8(line);
  const auto hex_at = [&](size_t at, uint32_t& value) {
    if (at + 6 > text.size() || text[at] != '\\' || text[at + 1] != 'u') return false;
    value = 0;
    for (size_t k = at + 2; k < at + 6; ++k) {
      const char c = text[k];
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
      if (digit < 0) return false;
      value = value * 16 + static_cast<uint32_t>(digit);
    }
    return true;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '\\' || i + 1 >= text.size()) {
      out += text[i++];
      continue;
    }
    uint32_t unit = 0, next = 0;
    if (!hex_at(i, unit)) {  // another escape, "\\" included: kept whole
      out.append(text, i, 2);
      i += 2;
      continue;
    }
    const bool high = unit >= 0xD800 && unit <= 0xDBFF, low = unit >= 0xDC00 && unit <= 0xDFFF;
    if (high && hex_at(i + 6, next) && next >= 0xDC00 && next <= 0xDFFF) {
      out.append(text, i, 12);  // a whole pair
      i += 12;
    } else {
      out += high || low ? std::string("\\ufffd") : text.substr(i, 6);
      i += 6;
    }
  }
  return out;
}

// A JSON line as prepare-data reads one: as it is, else repaired (repaired_json_line, said in
// `repaired`); a discarded value when neither parses.
nlohmann::json parse_json_line(std::string_view line, bool* repaired = nullptr) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) {
    j = nlohmann::json::parse(repaired_json_line(line), nullptr, false);
    if (repaired) *repaired = true;
  }
  return j;
}

// JSON Lines by its name, or a .json file whose first line is a JSON object: Megatron's
// "loose json" and Hugging Face's Dataset.to_json() write JSON Lines as .json, which read as
// text trained on the keys and escapes as one document.
bool is_jsonl(const std::string& path, std::string_view head) {
  const std::string ext = lower_extension(path);
  if (ext == ".jsonl" || ext == ".ndjson") return true;
  if (ext != ".json") return false;
  const std::string_view bom = "\xEF\xBB\xBF";  // as JSON parsers, a UTF-8 byte order mark
  if (head.substr(0, bom.size()) == bom) head.remove_prefix(bom.size());
  const size_t start = head.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos || head[start] != '{') return false;
  // A first line past 64 MiB is no record a corpus writes (a whole document as one line is).
  const size_t end = head.substr(0, start + (size_t{64} << 20)).find('\n', start);
  const std::string_view first = head.substr(
      start, end == std::string_view::npos ? head.size() - start : end - start);
  if (first.size() > (size_t{64} << 20)) return false;
  // Read as its lines are (for_each_document), repaired: unrepaired, a first line with bytes
  // that are not UTF-8 or an escaped half of a surrogate pair (Python's json.dumps writes one)
  // made the whole file one document of keys and quotes.
  const nlohmann::json j = parse_json_line(first);
  return !j.is_discarded() && j.is_object();
}

// Corpora often ship compressed (*.jsonl.zst, *.txt.gz) or in another encoding: read as UTF-8
// text, their bytes would become a document of U+FFFD (or of NULs) and train on noise, so such an
// input is refused by its magic bytes, and so is an earlier preparation's output (an index, or
// the token file beside one) in an input folder.
void refuse_not_text(const std::string& path, std::string_view head) {
  struct Format {
    std::string_view magic, what, way_out;
  };
  static constexpr Format kFormats[] = {
      {"\x1f\x8b", "gzip-compressed", "decompress it first (gunzip -k FILE)"},
      {"\x28\xb5\x2f\xfd", "zstd-compressed", "decompress it first (zstd -d FILE)"},
      {"\xfd"
       "7zXZ",
       "xz-compressed", "decompress it first (unxz -k FILE)"},
      {"BZh", "bzip2-compressed", "decompress it first (bunzip2 -k FILE)"},
      {"PK\x03\x04", "a zip archive", "unpack it first (unzip FILE)"},
      {"\xff\xfe", "UTF-16 text", "convert it first (iconv -f UTF-16 -t UTF-8 FILE)"},
      {"\xfe\xff", "UTF-16 text", "convert it first (iconv -f UTF-16 -t UTF-8 FILE)"},
      {"ZTTOKIDX", "a token index (an earlier trainer prepare-data's PREFIX.idx)",
       "train on that preparation as it is, or leave its .bin and .idx out"},
  };
  for (const Format& f : kFormats) {
    if (head.substr(0, f.magic.size()) != f.magic) continue;
    // bzip2's "BZh" (text may start so) is followed by a block size digit and its block magic.
    if (f.magic == "BZh" && (head.size() < 10 || head.substr(4, 6) != "1AY&SY")) continue;
    throw ConfigError("prepare-data: input '" + path + "' is " + std::string(f.what) +
                      ", not UTF-8 text; " + std::string(f.way_out) +
                      " and give the result, or leave it out with --exclude");
  }
  // A .json that holds one array (alpaca_data.json, Dataset.to_json(lines=False)): read as
  // text, the job trained on its brackets, keys and escapes as one document.
  if (lower_extension(path) == ".json") {
    std::string_view body = head;
    if (body.substr(0, 3) == "\xEF\xBB\xBF") body.remove_prefix(3);
    const size_t start = body.find_first_not_of(" \t\r\n");
    if (start != std::string_view::npos && body[start] == '[') {
      throw ConfigError("prepare-data: input '" + path +
                        "' is one JSON array, not JSON Lines (one object per line); convert "
                        "it first (jq -c '.[]' FILE > FILE.jsonl, or Hugging Face's "
                        "to_json(lines=True)) and give the .jsonl, or leave it out with "
                        "--exclude");
    }
  }
  // A token file has no magic of its own: it is one when an index sits beside it.
  const fs::path file(path);
  if (file.extension() == ".bin") {
    std::ifstream index(fs::path(file).replace_extension(".idx"), std::ios::binary);
    char magic[8] = {};
    if (index.read(magic, sizeof(magic)) && std::string_view(magic, sizeof(magic)) == "ZTTOKIDX") {
      throw ConfigError("prepare-data: input '" + path +
                        "' is the token file of an earlier preparation (its index is beside "
                        "it), not text; train on that preparation as it is, or leave its .bin "
                        "and .idx out with --exclude");
    }
  }
  // Another preparation's files in an input folder (its prefix is not this run's --out).
  const std::string name = file.filename().string();
  for (const std::string_view own : {".bin.partial", ".docs.partial", ".progress.json"}) {
    if (name.size() > own.size() && name.compare(name.size() - own.size(), own.size(), own) == 0)
      throw ConfigError("prepare-data: input '" + path +
                        "' is a file of another, interrupted trainer prepare-data, not text; "
                        "finish or remove that preparation, or leave it out with --exclude");
  }
  // Its PREFIX.lock, which stays after it finished: read as text, the holder's pid and host
  // became a document of their own once --exclude had left out the .bin and .idx beside it.
  if (file.extension() == ".lock") {
    fs::path prefix = file;
    prefix.replace_extension();
    bool beside = false;
    for (const char* own : {".bin", ".idx", ".bin.partial", ".progress.json"}) {
      std::error_code ec;
      beside = beside || fs::exists(prefix.string() + own, ec);
    }
    if (beside || head.substr(0, 4) == "pid ") {
      throw ConfigError("prepare-data: input '" + path +
                        "' is the lock file of another trainer prepare-data (--out " +
                        prefix.string() + "), not text; leave it out with --exclude '*.lock'");
    }
  }
}

std::vector<InputFile> list_inputs(const std::vector<std::string>& inputs,
                                   const std::vector<std::string>& exclude,
                                   const std::string& out_prefix) {
  const auto excluded = [&](const fs::path& p) {
    const std::string name = p.filename().string();
    return std::any_of(exclude.begin(), exclude.end(), [&](const std::string& glob) {
      return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0;
    });
  };
  std::vector<std::string> paths;
  std::set<std::string> walked;  // found below an input folder, not named
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(input, ec);
    if (ec || !fs::exists(st)) {
      throw ConfigError("prepare-data: input '" + input +
                        "' does not exist; give text files, JSONL files or folders of them");
    }
    if (fs::is_directory(st)) {
      std::vector<std::string> found;
      // Links are left out: Debian's fortunes, for one, links each file a second time.
      // Hidden entries below it (.git, .hg, .cache, .gitignore) and what --exclude names, folders
      // too, are not gone into: a repository's objects read as text trained on noise.
      fs::recursive_directory_iterator it(input, ec);
      for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        const fs::directory_entry& e = *it;
        const std::string name = e.path().filename().string();
        if (name.front() == '.' || excluded(e.path())) {
          if (e.is_directory() && !e.is_symlink()) it.disable_recursion_pending();
          continue;
        }
        if (e.is_regular_file() && !e.is_symlink() && !is_prepare_output(e.path(), out_prefix)) {
          found.push_back(e.path().string());
        }
      }
      // A folder it cannot list (a lost+found of root's, say): named, not an internal error.
      if (ec) {
        throw IoError("prepare-data: cannot read the input folder '" + input + "' (" +
                      ec.message() +
                      " at or below it); make it readable, or give its readable folders as "
                      "the inputs");
      }
      std::sort(found.begin(), found.end());
      paths.insert(paths.end(), found.begin(), found.end());
      walked.insert(found.begin(), found.end());
    } else if (!excluded(input) && !is_prepare_output(input, out_prefix)) {
      // A file named among the inputs (a shell's `corpus/*`) is left out as one found in a folder
      // is: what --exclude names, and this run's own outputs, which a resume's glob names too.
      paths.push_back(input);
    }
  }
  if (paths.empty()) {
    std::string named;
    for (const std::string& input : inputs) named += (named.empty() ? "" : ", ") + input;
    throw ConfigError("prepare-data: the inputs (" + named +
                      ") hold no files to read: below a folder, hidden entries, links and what "
                      "--exclude names are left out; give the text files or their folders");
  }
  std::vector<InputFile> files;
  for (const std::string& p : paths) {
    InputFile f;
    f.path = p;
    // Opens it: an unreadable or compressed input is refused before any work.
    const MappedFile map = map_input(f);
    f.size = map.size();
    const std::string_view head = map.view().substr(0, 8192);
    refuse_not_text(p, head);
    // git's test for a binary file: a NUL byte near its start (object files, images, a .pyc,
    // UTF-32 text), whose bytes would train as NUL and U+FFFD tokens. One found in a folder (a
    // Thumbs.db, a .png in a docs tree) is left out, saying so; one named is refused.
    if (const size_t nul = head.find('\0'); nul != std::string_view::npos) {
      const std::string what = "'" + p + "' holds a NUL byte at offset " + std::to_string(nul) +
                               ": a binary file, not UTF-8 text";
      if (!walked.count(p)) {
        throw ConfigError("prepare-data: input " + what + "; give text files");
      }
      std::fprintf(stderr, "prepare-data: left out %s (--exclude it to say nothing)\n",
                   what.c_str());
      continue;
    }
    f.jsonl = is_jsonl(p, map.view());
    files.push_back(std::move(f));
  }
  if (files.empty()) {
    throw ConfigError("prepare-data: the inputs hold no text files: every file found is binary "
                      "(the lines above name them); give the text files or their folders");
  }
  return files;
}

// The first document boundary at or after `from` in a splittable file: after a line break for
// JSONL, before a separator line otherwise.
size_t boundary_after(std::string_view text, size_t from, bool jsonl, const std::string& sep) {
  if (from >= text.size()) return text.size();
  if (jsonl) {
    const size_t nl = text.find('\n', from);
    return nl == std::string_view::npos ? text.size() : nl + 1;
  }
  // A separator line ends in "\n" or "\r\n".
  const std::string needle = "\n" + sep;
  for (size_t at = text.find(needle, from > 0 ? from - 1 : 0); at != std::string_view::npos;
       at = text.find(needle, at + 1)) {
    const std::string_view rest = text.substr(at + needle.size());
    if (rest.empty() || rest[0] == '\n' ||
        (rest.size() >= 2 && rest[0] == '\r' && rest[1] == '\n')) {
      return at + 1;
    }
  }
  return text.size();
}

std::vector<Unit> plan_units(const std::vector<InputFile>& files, const PrepareRequest& r) {
  std::vector<Unit> units(1);
  const auto close_if_full = [&] {
    if (units.back().bytes >= r.unit_bytes) units.emplace_back();
  };
  for (size_t f = 0; f < files.size(); ++f) {
    const bool splittable = files[f].jsonl || !r.separator.empty();
    // One document of 4 GiB or more cannot be encoded (BpeTokenizer::encode): refused here,
    // naming the file, not on a worker after hours of the units before it.
    if (!splittable && files[f].size >= (uint64_t{1} << 32)) {
      throw ConfigError("prepare-data: " + files[f].path + " is " + std::to_string(files[f].size) +
                        " bytes, one document (no --separator), and a document must be under 4 "
                        "GiB; split it at lines with --separator LINE, or make it JSONL (a "
                        "document per line)");
    }
    if (!splittable) {
      units.back().ranges.push_back({f, 0, files[f].size});
      units.back().bytes += static_cast<int64_t>(files[f].size);
      close_if_full();
      continue;
    }
    const MappedFile map = map_input(files[f]);
    const std::string_view text = map.view();
    size_t begin = 0;
    while (begin < text.size()) {
      const size_t room = static_cast<size_t>(
          std::max<int64_t>(1, r.unit_bytes - units.back().bytes));
      const size_t end = boundary_after(text, begin + room, files[f].jsonl, r.separator);
      units.back().ranges.push_back({f, begin, end});
      units.back().bytes += static_cast<int64_t>(end - begin);
      close_if_full();
      begin = end;
    }
  }
  if (units.back().ranges.empty()) units.pop_back();
  return units;
}

// Line number (1-based) of byte `at` of `text`, for messages.
int64_t line_of(std::string_view text, size_t at) {
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
}

// Calls doc(text, repaired) for each non-empty document in one range; `repaired`: it had bytes
// that are not UTF-8, read as U+FFFD (by the tokenizer, or by the JSON line's repair).
template <typename Fn>
void for_each_document(const InputFile& file, const Range& range, const PrepareRequest& r, Fn doc) {
  const MappedFile map = map_input(file);
  const std::string_view all = map.view();
  // The units were cut from the sizes listed at the start: a file rewritten since would be cut
  // mid-document, or past its end (std::out_of_range, said as zt's own bug).
  if (all.size() != file.size) {
    throw ConfigError("prepare-data: input file '" + file.path + "' changed while it was being " +
                      "prepared (" + std::to_string(file.size) + " bytes when listed, " +
                      std::to_string(all.size()) + " now); run the same command again once " +
                      "nothing writes it");
  }
  const std::string_view text = all.substr(range.begin, range.end - range.begin);
  if (file.jsonl) {
    size_t at = 0;
    while (at < text.size()) {
      size_t nl = text.find('\n', at);
      if (nl == std::string_view::npos) nl = text.size();
      std::string_view line = text.substr(at, nl - at);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.find_first_not_of(" \t") != std::string_view::npos) {
        const auto where = [&] {
          return file.path + ":" + std::to_string(line_of(all, range.begin + at));
        };
        bool repaired = false;
        const nlohmann::json j = parse_json_line(line, &repaired);
        if (j.is_discarded()) {
          // The parser's own words for the line as it stands, parsed again for them.
          std::string why;
          try {
            const nlohmann::json throws = nlohmann::json::parse(line);
          } catch (const nlohmann::json::exception& e) {
            why = e.what();
          }
          throw ConfigError(where() + ": not a JSON line (" + why + ")");
        }
        if (!j.is_object() || !j.contains(r.field)) {
          throw ConfigError(where() + ": no field '" + r.field +
                            "'; name the field that holds the text with --field");
        }
        const nlohmann::json& field = j[r.field];
        if (!field.is_string() && !field.is_null()) {
          throw ConfigError(where() + ": field '" + r.field + "' is " + field.type_name() +
                            ", not a string of text; fix that line, or name the field that "
                            "holds the text with --field");
        }
        // An empty text is no document, as in a text file: no lone <|endoftext|>. Nor is a
        // null one (Hugging Face exports hold a few).
        // The parser accepts UTF-8 only: a text that holds U+FFFD after a repaired parse had
        // bytes that are not (or an escaped half of a surrogate pair) there, not in another field.
        if (field.is_string() && !field.get_ref<const std::string&>().empty()) {
          const std::string& s = field.get_ref<const std::string&>();
          doc(std::string_view(s), repaired && s.find("\xEF\xBF\xBD") != std::string::npos);
        }
      }
      at = nl + 1;
    }
    return;
  }
  if (r.separator.empty()) {
    if (!text.empty()) doc(text, !is_valid_utf8(text));
    return;
  }
  // Lines equal to the separator end a document and belong to none.
  size_t start = 0, at = 0;
  while (at <= text.size()) {
    size_t nl = text.find('\n', at);
    const size_t line_end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(at, line_end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const bool is_sep = line == r.separator;
    if (is_sep || line_end == text.size()) {
      const size_t doc_end = is_sep ? at : text.size();
      if (doc_end > start) {
        const std::string_view d = text.substr(start, doc_end - start);
        doc(d, !is_valid_utf8(d));
      }
      start = nl == std::string_view::npos ? text.size() : nl + 1;
    }
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
}

UnitResult encode_unit(const std::vector<InputFile>& files, const Unit& unit,
                       const PrepareRequest& r, const BpeTokenizer& tokenizer, uint32_t eot) {
  UnitResult out;
  try {
    out.ids.reserve(static_cast<size_t>(unit.bytes / 3));
    for (const Range& range : unit.ranges) {
      for_each_document(files[range.file], range, r, [&](std::string_view text, bool repaired) {
        const size_t before = out.ids.size();
        try {
          tokenizer.encode_ordinary(text, out.ids);
        } catch (const ConfigError& e) {
          // The tokenizer's words name no input (a document too long to encode, found hours in).
          throw ConfigError("prepare-data: a document of " + files[range.file].path +
                            " in bytes [" + std::to_string(range.begin) + ", " +
                            std::to_string(range.end) + "): " + e.what());
        }
        out.ids.push_back(eot);
        out.doc_tokens.push_back(out.ids.size() - before);
        out.text_bytes += static_cast<int64_t>(text.size());
        if (repaired && out.repaired_documents++ == 0) out.first_repaired = files[range.file].path;
      });
    }
  } catch (...) {
    out.error = std::current_exception();
  }
  return out;
}

// `text` where it is UTF-8, else with each byte of 0x80 and above as \xNN: the journal is JSON,
// which holds UTF-8 only, and a file name from an old archive may be Latin-1.
std::string utf8_or_escaped(const std::string& text) {
  if (is_valid_utf8(text)) return text;
  std::string out;
  char hex[5];
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80) {
      out += c;
    } else {
      std::snprintf(hex, sizeof(hex), "\\x%02X", byte);
      out += hex;
    }
  }
  return out;
}

// What identifies a preparation for resuming: the tokenizer, the options that cut and read the
// documents, and every input's name, size and modification time.
std::string request_key(const std::vector<InputFile>& files, const PrepareRequest& r,
                        const BpeTokenizer& tokenizer) {
  std::ostringstream key;
  key << tokenizer.name() << ' ' << std::hex << tokenizer.fingerprint() << std::dec
      << " field=" << r.field << " sep=" << r.separator << " unit=" << r.unit_bytes;
  for (const InputFile& f : files) {
    struct stat st {};
    ::stat(f.path.c_str(), &st);
    key << '\n'
        << utf8_or_escaped(f.path) << ' ' << st.st_size << ' ' << st.st_mtim.tv_sec << '.'
        << st.st_mtim.tv_nsec;
  }
  return key.str();
}

// An output file written by appending, synced after each unit.
class AppendFile {
 public:
  AppendFile(const std::string& path, uint64_t keep_bytes, bool fresh) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (fresh ? O_TRUNC : 0), 0644);
    if (fd_ < 0) fail("open");
    if (::ftruncate(fd_, static_cast<off_t>(keep_bytes)) != 0) fail("truncate");
    if (::lseek(fd_, static_cast<off_t>(keep_bytes), SEEK_SET) < 0) fail("seek in");
  }
  ~AppendFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  void append(const void* data, size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("write");
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  void sync() {
    if (::fdatasync(fd_) != 0) fail("sync");
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw IoError(std::string("prepare-data: cannot ") + what + " '" + path_ + "': " +
                  std::strerror(errno) + "; is the output folder writable, and the disk not full?");
  }
  std::string path_;
  int fd_ = -1;
};

struct Journal {
  std::string key;
  int64_t units_done = 0;
  uint64_t bin_bytes = 0;
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t text_bytes = 0;
  int64_t bytes_done = 0;
  int64_t repaired_documents = 0;
  std::string first_repaired;
};

// Outputs that exist and that no journal of this preparation accounts for are someone's
// (an earlier preparation, another tool's PREFIX.bin / .idx): not replaced unless asked.
void refuse_existing_outputs(const PrepareSummary& s) {
  for (const std::string& path : {s.tokens_path, s.index_path}) {
    if (!fs::exists(path)) continue;
    throw ConfigError("prepare-data: '" + path +
                      "' exists and no interrupted preparation of these inputs explains it; "
                      "choose another --out PREFIX, move it aside, or pass --overwrite to "
                      "replace it");
  }
}

// PREFIX.lock, held for the whole preparation: a second prepare-data into the same prefix
// (every task of an sbatch script on a shared file system) truncated the first one's partial
// files under it, and the index it then wrote named wrong document starts.
class PrefixLock {
 public:
  explicit PrefixLock(const std::string& prefix) : lock_(prefix + ".lock") {
    const std::string& path = lock_.path();
    switch (lock_.state()) {
      case ExclusiveFileLock::State::held: lock_.record_holder(); return;
      case ExclusiveFileLock::State::no_locks:
        // A file system without locks prepared before there was a lock: it still does, said once.
        std::fprintf(stderr,
                     "prepare-data: note: %s cannot be locked here (%s): nothing stops a second "
                     "prepare-data into the same --out meanwhile\n",
                     path.c_str(), std::strerror(lock_.error()));
        return;
      case ExclusiveFileLock::State::busy: {
        const std::string holder = lock_.holder();
        throw ConfigError("prepare-data: another prepare-data (" +
                          (holder.empty() ? std::string("a process") : holder) +
                          ") is writing --out " + prefix + " (it holds " + path +
                          "); wait for it to end, or give this one another --out PREFIX");
      }
      case ExclusiveFileLock::State::cannot_open:
        throw IoError("prepare-data: cannot open the lock file '" + path +
                      "': " + lock_.open_problem() + " (or choose another --out PREFIX)");
      case ExclusiveFileLock::State::cannot_lock: break;
    }
    throw IoError("prepare-data: cannot lock '" + path + "': " + std::strerror(lock_.error()) +
                  "; choose another --out PREFIX");
  }

 private:
  ExclusiveFileLock lock_;
};

std::optional<Journal> read_journal(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    Journal out;
    out.key = j.at("key").get<std::string>();
    out.units_done = j.at("units_done").get<int64_t>();
    out.bin_bytes = j.at("bin_bytes").get<uint64_t>();
    out.documents = j.at("documents").get<int64_t>();
    out.tokens = j.at("tokens").get<int64_t>();
    out.text_bytes = j.at("text_bytes").get<int64_t>();
    out.bytes_done = j.at("bytes_done").get<int64_t>();
    out.repaired_documents = j.value("repaired_documents", int64_t{0});
    out.first_repaired = j.value("first_repaired", std::string());
    return out;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a journal cut short is no journal: start over
  }
}

void write_journal(const std::string& path, const Journal& j) {
  const nlohmann::json out = {{"key", j.key},
                              {"units_done", j.units_done},
                              {"bin_bytes", j.bin_bytes},
                              {"documents", j.documents},
                              {"tokens", j.tokens},
                              {"text_bytes", j.text_bytes},
                              {"bytes_done", j.bytes_done},
                              {"repaired_documents", j.repaired_documents},
                              {"first_repaired", utf8_or_escaped(j.first_repaired)}};
  const std::string tmp = path + ".tmp";
  {
    AppendFile f(tmp, 0, true);
    const std::string text = out.dump();
    f.append(text.data(), text.size());
    f.sync();
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw IoError("prepare-data: cannot rename '" + tmp + "': " + std::strerror(errno));
  }
}

std::vector<uint64_t> read_doc_tokens(const std::string& path, int64_t documents) {
  std::vector<uint64_t> out(static_cast<size_t>(documents));
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * 8));
  if (!in) throw IoError("prepare-data: cannot read '" + path + "' back; run again from scratch");
  return out;
}

}  // namespace

// With --out inside an input folder (`prepare-data data/ --out data/corpus`), a listing found
// these files: a resumed run saw the listing changed and started over, a rerun read its output.
bool is_prepare_output(const std::filesystem::path& file, const std::string& out_prefix) {
  std::error_code ec;
  const fs::path prefix = fs::weakly_canonical(fs::absolute(out_prefix), ec);
  if (ec) return false;
  const fs::path canon = fs::weakly_canonical(file, ec);
  if (ec || canon.parent_path() != prefix.parent_path()) return false;
  const std::string name = canon.filename().string();
  const std::string stem = prefix.filename().string() + ".";
  if (name.compare(0, stem.size(), stem) != 0) return false;
  const std::string rest = name.substr(stem.size());
  for (const std::string own :
       {"bin", "idx", "bin.partial", "docs.partial", "progress.json", "lock"}) {
    if (rest == own || rest == own + ".tmp") return true;
  }
  return false;
}

PrepareSummary prepare_data(const PrepareRequest& r,
                            const std::function<void(const PrepareProgress&)>& report) {
  const auto started = std::chrono::steady_clock::now();
  if (r.out_prefix.empty()) throw ConfigError("prepare-data needs --out PREFIX");
  // A folder as the prefix wrote hidden files in it (runs/data/ -> runs/data/.bin).
  std::error_code dir_ec;
  if (r.out_prefix.back() == '/' || fs::is_directory(r.out_prefix, dir_ec)) {
    throw ConfigError("--out " + r.out_prefix + " names a folder; --out is the files' prefix " +
                      "(--out data/corpus writes data/corpus.bin and data/corpus.idx)");
  }
  const auto tokenizer = load_tokenizer(r.tokenizer, r.tokenizer_dir);
  const int64_t eot_id = tokenizer->special_id("<|endoftext|>");
  if (eot_id < 0) {
    throw ConfigError("prepare-data: tokenizer '" + tokenizer->name() +
                      "' has no <|endoftext|> to put between documents, as zt's readers "
                      "expect; use one that has it (gpt2, r50k_base, p50k_base, cl100k_base, "
                      "o200k_base, or a tiktoken JSON whose special_tokens hold it)");
  }
  const auto eot = static_cast<uint32_t>(eot_id);
  const bool wide = tokenizer->vocab_size() > 65536;
  const size_t id_bytes = wide ? 4 : 2;

  const std::vector<InputFile> files = list_inputs(r.inputs, r.exclude, r.out_prefix);
  const std::vector<Unit> units = plan_units(files, r);
  if (units.empty() ||
      std::all_of(units.begin(), units.end(), [](const Unit& u) { return u.bytes == 0; })) {
    throw ConfigError("prepare-data: the inputs hold no text (every file is empty)");
  }
  PrepareSummary summary;
  summary.tokens_path = r.out_prefix + ".bin";
  summary.index_path = r.out_prefix + ".idx";
  summary.tokenizer = tokenizer->name();
  summary.dtype = wide ? "uint32" : "uint16";
  const std::string bin_partial = summary.tokens_path + ".partial";
  const std::string docs_partial = r.out_prefix + ".docs.partial";
  const std::string journal_path = r.out_prefix + ".progress.json";
  const fs::path out_dir = fs::path(r.out_prefix).parent_path();
  std::error_code out_error;
  if (!out_dir.empty()) fs::create_directories(out_dir, out_error);
  if (out_error) {
    throw IoError("prepare-data: cannot create the folder '" + out_dir.string() + "' of --out " +
                  r.out_prefix + ": " + out_error.message() + "; choose another --out PREFIX");
  }
  const PrefixLock prefix_lock(r.out_prefix);

  PrepareProgress p;
  p.units = static_cast<int64_t>(units.size());
  for (const Unit& u : units) p.bytes += u.bytes;
  Journal j;
  j.key = request_key(files, r, *tokenizer);
  const auto file_size = [](const std::string& path) {
    std::error_code ec;
    const uint64_t n = fs::file_size(path, ec);
    return ec ? uint64_t{0} : n;
  };
  const auto old = read_journal(journal_path);
  // A journal resumes only over the bytes it recorded: partial files cut shorter (or gone) since
  // are not padded back; the preparation starts over.
  const bool bin_intact = old && (old->units_done == p.units && !fs::exists(bin_partial)
                                      ? fs::exists(summary.tokens_path)
                                      : file_size(bin_partial) >= old->bin_bytes);
  const bool intact = old && old->key == j.key && old->units_done <= p.units && bin_intact &&
                      file_size(docs_partial) >= static_cast<uint64_t>(old->documents) * 8;
  if (intact) {
    j = *old;
    p.resumed_units = j.units_done;
    p.bytes_resumed = j.bytes_done;
  }
  if (!intact && !r.overwrite) refuse_existing_outputs(summary);
  const bool finished_before = j.units_done == p.units && !fs::exists(bin_partial);
  if (!finished_before) {
    AppendFile bin(bin_partial, j.bin_bytes, j.units_done == 0);
    AppendFile docs(docs_partial, static_cast<uint64_t>(j.documents) * 8, j.units_done == 0);
    unsigned threads = r.threads > 0 ? static_cast<unsigned>(r.threads)
                                     : static_cast<unsigned>(cpus_this_process_may_use());
    threads = static_cast<unsigned>(
        std::min<int64_t>(threads, std::max<int64_t>(1, p.units - j.units_done)));
    summary.threads = static_cast<int>(threads);

    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::optional<UnitResult>> results(units.size());
    int64_t next = j.units_done;     // the next unit a worker takes
    int64_t written = j.units_done;  // units the writer has written
    bool stop = false;
    const int64_t ahead = 2 * static_cast<int64_t>(threads);
    std::vector<std::thread> workers;
    const auto join_all = [&] {
      {
        std::lock_guard<std::mutex> lock(mu);
        stop = true;
      }
      cv.notify_all();
      for (std::thread& w : workers) w.join();
    };
    const auto work = [&] {
      for (;;) {
        int64_t u;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return stop || next >= p.units || next < written + ahead; });
          if (stop || next >= p.units) return;
          u = next++;
        }
        UnitResult result = encode_unit(files, units[static_cast<size_t>(u)], r, *tokenizer, eot);
        std::lock_guard<std::mutex> lock(mu);
        results[static_cast<size_t>(u)] = std::move(result);
        cv.notify_all();
      }
    };
    try {
      for (unsigned t = 0; t < threads; ++t) workers.emplace_back(work);
      std::vector<uint16_t> narrow;
      for (int64_t u = j.units_done; u < p.units; ++u) {
        UnitResult result;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return results[static_cast<size_t>(u)].has_value(); });
          result = std::move(*results[static_cast<size_t>(u)]);
          results[static_cast<size_t>(u)].reset();
        }
        if (result.error) std::rethrow_exception(result.error);
        if (wide) {
          bin.append(result.ids.data(), result.ids.size() * id_bytes);
        } else {
          narrow.assign(result.ids.begin(), result.ids.end());
          bin.append(narrow.data(), narrow.size() * id_bytes);
        }
        docs.append(result.doc_tokens.data(), result.doc_tokens.size() * 8);
        bin.sync();
        docs.sync();
        j.units_done = u + 1;
        j.bin_bytes += result.ids.size() * id_bytes;
        j.documents += static_cast<int64_t>(result.doc_tokens.size());
        j.tokens += static_cast<int64_t>(result.ids.size());
        j.text_bytes += result.text_bytes;
        j.bytes_done += units[static_cast<size_t>(u)].bytes;
        if (j.repaired_documents == 0) j.first_repaired = result.first_repaired;
        j.repaired_documents += result.repaired_documents;
        write_journal(journal_path, j);
        {
          std::lock_guard<std::mutex> lock(mu);
          written = u + 1;
        }
        cv.notify_all();
        p.units_done = j.units_done;
        p.bytes_done = j.bytes_done;
        p.documents = j.documents;
        p.tokens = j.tokens;
        p.seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (report) report(p);
      }
    } catch (...) {
      join_all();
      throw;
    }
    join_all();
    if (j.documents == 0) {
      // Text, but no document (every JSONL field "", every line blank): a token file of nothing
      // was refused only when a job tried to train on it.
      std::error_code ec;
      for (const std::string& f : {bin_partial, docs_partial, journal_path}) fs::remove(f, ec);
      throw ConfigError("prepare-data: the inputs hold no document (every line blank, or every "
                        "JSONL --field \"" +
                        r.field + "\" empty); check the inputs and --field");
    }
  }
  // The index, then the tokens under their final name: a PREFIX.bin is only ever beside its
  // finished index (a job takes a .bin without one for a bare token file, and trains on it).
  TokenIndex index;
  index.tokenizer = tokenizer->name();
  // A rank file's path as an absolute one: eval and sample load it from the index, run from
  // any folder.
  index.tokenizer_source = names_rank_file(r.tokenizer) ? fs::absolute(r.tokenizer).string()
                                                        : r.tokenizer;
  std::ostringstream hex;
  hex << std::hex << tokenizer->fingerprint();
  index.fingerprint = hex.str();
  index.vocab = tokenizer->vocab_size();
  index.dtype = summary.dtype;
  index.eot = eot;
  index.tokens = j.tokens;
  index.text_bytes = j.text_bytes;
  index.sources = r.inputs;
  index.documents = j.documents;
  index.document_starts.push_back(0);
  for (const uint64_t n : read_doc_tokens(docs_partial, j.documents)) {
    index.document_starts.push_back(index.document_starts.back() + n);
  }
  write_token_index(summary.index_path, index);
  if (!finished_before && std::rename(bin_partial.c_str(), summary.tokens_path.c_str()) != 0) {
    throw IoError("prepare-data: cannot rename '" + bin_partial + "': " + std::strerror(errno));
  }
  // The journal first: without it a later run starts fresh; with it, it finds what it needs.
  fs::remove(journal_path);
  fs::remove(docs_partial);

  p.units_done = j.units_done;
  p.bytes_done = j.bytes_done;
  p.documents = j.documents;
  p.tokens = j.tokens;
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  summary.progress = p;
  summary.text_bytes = j.text_bytes;
  summary.repaired_documents = j.repaired_documents;
  summary.first_repaired = j.first_repaired;
  return summary;
}

}  // namespace zt::data
