#include "data/token_index.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "zt/error.h"

namespace zt::data {

// Token files and indexes are little-endian, as nanoGPT's and Megatron's readers take them; this
// code reads and writes them in the host's order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "zt's token files need a little-endian host");

namespace {

constexpr char kMagic[8] = {'Z', 'T', 'T', 'O', 'K', 'I', 'D', 'X'};
constexpr uint32_t kVersion = 1;

}  // namespace

bool is_token_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof(kMagic)];
  return in.read(magic, sizeof(magic)) && std::memcmp(magic, kMagic, sizeof(kMagic)) == 0;
}

std::string index_path_for(const std::string& tokens_path) {
  const std::string bin = ".bin";
  if (tokens_path.size() > bin.size() &&
      tokens_path.compare(tokens_path.size() - bin.size(), bin.size(), bin) == 0) {
    return tokens_path.substr(0, tokens_path.size() - bin.size()) + ".idx";
  }
  return tokens_path + ".idx";
}

namespace {

// The index `json` and `index`'s document starts into `tmp`, on the disk, then named `path`.
void write_index_file(const std::string& tmp, const std::string& path, const std::string& json,
                      const TokenIndex& index) {
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const auto length = static_cast<uint32_t>(json.size());
    out.write(kMagic, sizeof(kMagic));
    out.write(reinterpret_cast<const char*>(&kVersion), 4);
    out.write(reinterpret_cast<const char*>(&length), 4);
    out << json;
    const size_t padding = (8 - json.size() % 8) % 8;
    out.write("\0\0\0\0\0\0\0", static_cast<std::streamsize>(padding));
    out.write(reinterpret_cast<const char*>(index.document_starts.data()),
              static_cast<std::streamsize>(index.document_starts.size() * sizeof(uint64_t)));
    out.flush();
    if (!out) {
      // A stream keeps no error code of its own; errno is the failed call's where it was set.
      const int error = errno;
      throw IoError("cannot write the token index '" + tmp + "'" +
                    (error ? ": " + std::string(std::strerror(error)) : "; is the disk full?") +
                    " (give --out a folder this user can write, with room)");
    }
  }
  // On the disk before it takes its name: renamed first, a crash could leave an empty index.
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw IoError("cannot write the token index '" + tmp + "' to disk: " + why);
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw IoError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
}

}  // namespace

void write_token_index(const std::string& path, const TokenIndex& index) {
  nlohmann::json header = {{"tokenizer", index.tokenizer},
                           {"tokenizer_source", index.tokenizer_source},
                           {"fingerprint", index.fingerprint},
                           {"vocab", index.vocab},
                           {"dtype", index.dtype},
                           {"eot", index.eot},
                           {"documents", index.documents},
                           {"tokens", index.tokens},
                           {"text_bytes", index.text_bytes},
                           {"sources", index.sources}};
  // A path that is not UTF-8 (a Latin-1 file name from an old archive) is kept with U+FFFD for
  // its odd bytes: the strict dump threw a JSON type error naming no file.
  const std::string json = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string tmp = path + ".tmp";
  // A failed write leaves no .tmp behind (on a full disk it held the space the next try needs).
  try {
    write_index_file(tmp, path, json, index);
  } catch (const Error&) {
    ::unlink(tmp.c_str());  // a file only: a folder of that name is not this write's
    throw;
  }
}

TokenIndex read_token_index(const std::string& path, bool with_starts) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read the token index '" + path + "': " + std::strerror(errno));
  const auto broken = [&](const std::string& why) {
    return ConfigError("token index '" + path + "': " + why +
                       "; run trainer prepare-data again with --overwrite to rewrite it");
  };
  char magic[8];
  uint32_t version = 0, length = 0;
  in.read(magic, 8);
  const auto magic_bytes = static_cast<size_t>(in.gcount());
  in.read(reinterpret_cast<char*>(&version), 4);
  in.read(reinterpret_cast<char*>(&length), 4);
  // Ours but cut short (a crash while it was written): not another tool's.
  if (!in && std::memcmp(magic, kMagic, magic_bytes) == 0) {
    throw broken("cut short in its first 16 bytes (a crash while it was written?)");
  }
  if (!in || std::memcmp(magic, kMagic, 8) != 0) {
    // Another tool's index of the same name (Megatron writes PREFIX.bin + PREFIX.idx): the way
    // out keeps it.
    throw ConfigError("token index '" + path +
                      "': not a zt token index (another tool's, such as Megatron's?); move it "
                      "aside to read the .bin beside it as a bare token file (data.token_dtype), "
                      "or make a zt one with trainer prepare-data --out into another prefix");
  }
  if (version != kVersion) {
    throw broken("format version " + std::to_string(version) + ", this zt reads version " +
                 std::to_string(kVersion));
  }
  // Sizes come from the file before anything is allocated by them: a damaged header must not ask
  // for gigabytes (a document count of 2^40 would be an 8 TiB table).
  std::error_code size_error;
  const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(path, size_error));
  if (size_error) {
    throw IoError("cannot read the token index '" + path + "': " + size_error.message());
  }
  const int64_t starts_offset = 16 + static_cast<int64_t>(length) + (8 - length % 8) % 8;
  if (length > (64u << 20)) throw broken("a header of " + std::to_string(length) + " bytes");
  if (starts_offset > file_bytes) {
    throw broken("cut short in its header (" + std::to_string(file_bytes) +
                 " bytes, its header alone says " + std::to_string(starts_offset) + ")");
  }
  std::string json(length, '\0');
  in.read(json.data(), length);
  in.ignore(static_cast<std::streamsize>((8 - length % 8) % 8));
  if (!in) throw broken("cut short in its header");
  TokenIndex index;
  int64_t& documents = index.documents;
  try {
    const nlohmann::json h = nlohmann::json::parse(json);
    index.tokenizer = h.at("tokenizer").get<std::string>();
    index.tokenizer_source = h.value("tokenizer_source", index.tokenizer);
    index.fingerprint = h.at("fingerprint").get<std::string>();
    index.vocab = h.at("vocab").get<int64_t>();
    index.dtype = h.at("dtype").get<std::string>();
    index.eot = h.at("eot").get<int64_t>();
    documents = h.at("documents").get<int64_t>();
    index.tokens = h.at("tokens").get<int64_t>();
    index.text_bytes = h.at("text_bytes").get<int64_t>();
    index.sources = h.at("sources").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw broken(std::string("its header: ") + e.what());
  }
  if (index.dtype != "uint16" && index.dtype != "uint32") throw broken("dtype " + index.dtype);
  if (documents < 0 || documents > (int64_t{1} << 40)) {
    throw broken(std::to_string(documents) + " documents");
  }
  // Bounded so that the sizes computed from them (tokens x element size, vocab rounded up to a
  // multiple of 64) cannot overflow.
  if (index.tokens < 0 || index.tokens > (int64_t{1} << 60) || index.vocab <= 0 ||
      index.vocab > (int64_t{1} << 32) || index.eot < 0 || index.eot >= index.vocab) {
    throw broken("its header's tokens " + std::to_string(index.tokens) + ", vocab " +
                 std::to_string(index.vocab) + " and eot " + std::to_string(index.eot) +
                 " cannot all be true");
  }
  index.starts_offset = starts_offset;
  // prepare-data writes exactly the header and the documents + 1 starts: any other length is
  // damage, whether the table is read here or entry by entry later.
  const int64_t expected_bytes = starts_offset + (documents + 1) * 8;
  if (file_bytes != expected_bytes) {
    throw broken(std::string(file_bytes < expected_bytes ? "cut short in" : "longer than") +
                 " its document starts (" + std::to_string(file_bytes) + " bytes where its " +
                 std::to_string(documents) + " documents make " + std::to_string(expected_bytes) +
                 ")");
  }
  if (!with_starts) return index;
  index.document_starts.resize(static_cast<size_t>(documents) + 1);
  in.read(reinterpret_cast<char*>(index.document_starts.data()),
          static_cast<std::streamsize>(index.document_starts.size() * sizeof(uint64_t)));
  if (!in) throw broken("cut short in its document starts");
  for (size_t i = 1; i < index.document_starts.size(); ++i) {
    if (index.document_starts[i] < index.document_starts[i - 1]) {
      throw broken("document " + std::to_string(i) + " starts before the one before it");
    }
  }
  if (index.document_starts.front() != 0 ||
      index.document_starts.back() != static_cast<uint64_t>(index.tokens)) {
    throw broken("its document starts do not span its " + std::to_string(index.tokens) + " tokens");
  }
  return index;
}

int64_t nearest_document_start(const std::string& path, const TokenIndex& index, int64_t token,
                               int64_t lo, int64_t hi) {
  if (lo > hi) return -1;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot read the token index '" + path + "': " + std::strerror(errno));
  const struct ClosedOnExit {
    int fd;
    ~ClosedOnExit() { ::close(fd); }
  } closed_on_exit{fd};
  const auto start = [&](int64_t i) {  // entry i of the table
    uint64_t value = 0;
    const off_t at = static_cast<off_t>(index.starts_offset + i * 8);
    if (::pread(fd, &value, 8, at) != 8) {
      throw ConfigError("token index '" + path +
                        "': cut short in its document starts; run "
                        "trainer prepare-data again with --overwrite to rewrite it");
    }
    return static_cast<int64_t>(value);
  };
  // The first entry >= x: entries are sorted (prepare-data writes them in order).
  const auto first_at_or_after = [&](int64_t x) {
    int64_t a = 0, b = index.documents + 1;
    while (a < b) {
      const int64_t mid = a + (b - a) / 2;
      if (start(mid) < x) a = mid + 1;
      else b = mid;
    }
    return a;
  };
  int64_t best = -1;
  const int64_t after = first_at_or_after(std::max(token, lo));
  if (after <= index.documents && start(after) <= hi) best = start(after);
  // The last entry <= min(token, hi): the one before the first entry above it.
  const int64_t above = first_at_or_after(std::min(token, hi) + 1);
  if (above > 0) {
    const int64_t before = start(above - 1);
    if (before >= lo && (best < 0 || token - before <= best - token)) best = before;
  }
  return best;
}

}  // namespace zt::data
