#include "zt/host/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <unordered_map>

#include "util/posix_file.h"
#include "util/save_io_limit.h"
#include "zt/error.h"

namespace zt {

// safetensors is little-endian, and zt writes and reads host values as their bytes (the CRCs
// cover the same bytes): a big-endian build would make files that pass its own checks and are
// wrong for every other reader.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "zt's checkpoints and safetensors files are written as host bytes: little-endian "
              "hosts only");

namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxHeaderJson = kSafetensorsMaxHeaderJson;
constexpr int64_t kLengthPrefix = 8;

// numel * element_size, or -1 when a dimension is negative or the product overflows int64.
int64_t byte_size(const std::vector<int64_t>& shape, int64_t element_size) {
  int64_t n = element_size;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

std::string range_text(int64_t offset, int64_t bytes) {
  return "bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) + ")";
}

void check_range(const std::string& what, int64_t offset, int64_t bytes, int64_t size) {
  if (offset < 0 || bytes < 0 || offset > size || bytes > size - offset) {
    throw InternalError("safetensors: " + range_text(offset, bytes) + " is outside " + what + " (" +
                        std::to_string(size) + " bytes)");
  }
}

// "model.safetensors, rank-0.safetensors" in a folder (the first few, sorted), or what to look
// for when it holds none.
std::string safetensors_files_in(const std::string& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".safetensors") names.push_back(it->path().filename().string());
  }
  if (names.empty()) return "it holds no *.safetensors file";
  std::sort(names.begin(), names.end());
  std::string out = "it holds ";
  const size_t shown = std::min<size_t>(names.size(), 4);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

}  // namespace

int64_t safetensors_element_size(const std::string& dtype) {
  static const std::unordered_map<std::string, int64_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

// ---------------------------------------------------------------------------------------------
// Writer

struct SafetensorsWriter::Impl {
  std::vector<SafetensorsEntry> entries;
  std::unordered_map<std::string, int64_t> index;
  std::map<std::string, std::string> metadata;
  std::string path, header;
  int64_t data_bytes = 0;
  int fd = -1;

  ~Impl() {
    if (fd >= 0) ::close(fd);  // without fsync: an abandoned file
  }

  void require_open(const char* call) const {
    if (fd < 0) throw InternalError(std::string("SafetensorsWriter::") + call + " before open()");
  }
  std::string header_json() const;
  // `file_offset` counts from the start of the file (the header included).
  void pwrite_or_throw(int64_t file_offset, const void* data, int64_t bytes,
                       const std::string& what);
};

std::string SafetensorsWriter::Impl::header_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!metadata.empty()) j["__metadata__"] = metadata;
  for (const auto& e : entries) {
    j[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  }
  return j.dump();
}

void SafetensorsWriter::Impl::pwrite_or_throw(int64_t file_offset, const void* data, int64_t bytes,
                                              const std::string& what) {
  // Bounded chunk by chunk on a saving thread (util/save_io_limit.h).
  const int err = ckpt::pwrite_watched(fd, data, bytes, file_offset, path);
  if (err == 0) return;
  const std::string way_out = ckpt::write_way_out(err, "write elsewhere");
  throw IoError("cannot write " + std::to_string(bytes) + " bytes of " + what + " to " + path +
                " at offset " + std::to_string(file_offset) + ": " + ckpt::errno_text(err) +
                way_out);
}

SafetensorsWriter::SafetensorsWriter() : impl_(std::make_unique<Impl>()) {}

SafetensorsWriter::~SafetensorsWriter() = default;

int64_t SafetensorsWriter::add(const std::string& name, const std::string& dtype,
                               const std::vector<int64_t>& shape) {
  if (impl_->fd >= 0) throw InternalError("SafetensorsWriter::add('" + name + "') after open()");
  if (name.empty() || name == "__metadata__") {
    throw InternalError("safetensors: '" + name + "' cannot name a tensor");
  }
  if (impl_->index.count(name)) {
    throw InternalError("safetensors: tensor '" + name + "' added twice");
  }
  const int64_t element = safetensors_element_size(dtype);
  if (element == 0) {
    throw InternalError("safetensors: tensor '" + name + "' has unknown dtype '" + dtype + "'");
  }
  const int64_t bytes = byte_size(shape, element);
  if (bytes < 0) throw InternalError("safetensors: tensor '" + name + "' has an invalid shape");
  SafetensorsEntry e{name, dtype, shape, impl_->data_bytes, impl_->data_bytes + bytes};
  impl_->data_bytes = e.end;
  impl_->entries.push_back(std::move(e));
  impl_->index[name] = static_cast<int64_t>(impl_->entries.size()) - 1;
  return impl_->index[name];
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  if (impl_->fd >= 0) throw InternalError("SafetensorsWriter::set_metadata after open()");
  impl_->metadata[key] = value;
}

void SafetensorsWriter::open(const std::string& path, int64_t data_alignment) {
  if (impl_->fd >= 0) throw InternalError("SafetensorsWriter::open called twice (" + path + ")");
  impl_->path = path;
  std::string json = impl_->header_json();
  // A multiple of 8 too, so every dtype's elements are aligned in a memory-mapped file.
  const int64_t align = std::lcm(std::max<int64_t>(data_alignment, 1), int64_t{8});
  const int64_t total = (kLengthPrefix + static_cast<int64_t>(json.size()) + align - 1) / align *
                        align;
  json.append(static_cast<size_t>(total - kLengthPrefix) - json.size(), ' ');
  // Past what every reader (zt's, and a checkpoint's load) accepts, the file would be written,
  // published and never loaded, and the older checkpoints pruned meanwhile.
  if (static_cast<int64_t>(json.size()) > kMaxHeaderJson) {
    throw IoError("cannot write " + path + ": its safetensors header would take " +
                  std::to_string(json.size()) + " bytes, over the " +
                  std::to_string(kMaxHeaderJson) +
                  "-byte limit its readers accept: too many tensors in one file (a checkpoint's "
                  "rank file holds fewer pieces with shard_bucket than with shard_tensor)");
  }
  std::string& h = impl_->header;
  h.assign(kLengthPrefix, '\0');
  const auto length = static_cast<uint64_t>(json.size());
  for (int i = 0; i < kLengthPrefix; ++i) h[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  h += json;
  int err = 0;
  {
    const ckpt::SaveIoDeadline deadline("creating " + path);
    impl_->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    err = errno;  // before the deadline's end, which may change it
  }
  if (impl_->fd < 0) {
    throw IoError("cannot create " + path + ": " + ckpt::errno_text(err) +
                  "; check that the folder exists and is writable");
  }
  impl_->pwrite_or_throw(0, h.data(), static_cast<int64_t>(h.size()), "the header");
}

void SafetensorsWriter::write(int64_t index, int64_t offset, const void* data, int64_t bytes) {
  impl_->require_open("write");
  if (index < 0 || index >= static_cast<int64_t>(impl_->entries.size())) {
    throw InternalError("SafetensorsWriter::write: no tensor #" + std::to_string(index));
  }
  const SafetensorsEntry& e = impl_->entries[static_cast<size_t>(index)];
  check_range("tensor '" + e.name + "'", offset, bytes, e.end - e.begin);
  impl_->pwrite_or_throw(header_bytes() + e.begin + offset, data, bytes,
                         "tensor " + e.name + " (" + range_text(offset, bytes) + ")");
}

void SafetensorsWriter::write_data(int64_t offset, const void* data, int64_t bytes) {
  impl_->require_open("write_data");
  check_range("the data section", offset, bytes, impl_->data_bytes);
  impl_->pwrite_or_throw(header_bytes() + offset, data, bytes, "the data section");
}

void SafetensorsWriter::close(bool sync) {
  if (impl_->fd < 0) return;
  const int fd = impl_->fd;
  impl_->fd = -1;
  int err = 0;
  if (sync) {
    // The page cache's dirty bytes first, 16 MiB at a time, each bounded on a saving thread: a
    // file written through the cache (a file system without O_DIRECT) was flushed whole by one
    // fsync under one bound. A file system without sync_file_range leaves it all to the fsync.
    const int64_t size = file_bytes();
    for (int64_t at = 0; at < size; at += ckpt::kSaveIoChunkBytes) {
      const int64_t n = std::min(ckpt::kSaveIoChunkBytes, size - at);
      const ckpt::SaveIoDeadline deadline("flushing " + std::to_string(n) + " bytes at offset " +
                                          std::to_string(at) + " of " + impl_->path);
      if (::sync_file_range(fd, at, n,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                SYNC_FILE_RANGE_WAIT_AFTER) != 0)
        break;  // the fsync below reports a real failure
    }
  }
  {
    const ckpt::SaveIoDeadline deadline((sync ? "fsyncing " : "closing ") + impl_->path);
    if (sync && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && err == 0) err = errno;
  }
  if (err != 0) {
    throw IoError("cannot " + std::string(sync ? "fsync and " : "") + "close " + impl_->path +
                  " (" + std::to_string(file_bytes()) + " bytes): " + ckpt::errno_text(err) +
                  "; the storage refused the data");
  }
}

const std::vector<SafetensorsEntry>& SafetensorsWriter::entries() const { return impl_->entries; }
int64_t SafetensorsWriter::header_bytes() const {
  return static_cast<int64_t>(impl_->header.size());
}
int64_t SafetensorsWriter::file_bytes() const { return header_bytes() + impl_->data_bytes; }
const std::string& SafetensorsWriter::header() const { return impl_->header; }
const std::string& SafetensorsWriter::path() const { return impl_->path; }

// ---------------------------------------------------------------------------------------------
// Reader

struct SafetensorsReader::Impl {
  std::string path, header;
  std::vector<SafetensorsEntry> entries;  // in file order
  std::unordered_map<std::string, size_t> index;
  std::map<std::string, std::string> metadata;
  int64_t file_size = 0;
  int fd = -1;

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  [[noreturn]] void reject(const std::string& why) const {
    throw ConfigError(path + ": not a safetensors file: " + why +
                      "; give a file written by zt or Hugging Face's safetensors");
  }
  void read_header();
  void parse_header();
  void parse_entry(const std::string& name, const nlohmann::json& value);
  void check_layout();
};

void SafetensorsReader::Impl::read_header() {
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open " + path + ": " + ckpt::errno_text(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) throw IoError("cannot stat " + path + ": " + ckpt::errno_text(errno));
  file_size = static_cast<int64_t>(st.st_size);
  // A folder opens and stats as 4096 bytes, and its read then failed as "shorter than the
  // header": a Hugging Face snapshot or a zt step folder named instead of the file in it.
  if (S_ISDIR(st.st_mode)) {
    throw ConfigError(path + " is a folder, not a safetensors file: name the file in it (" +
                      safetensors_files_in(path) +
                      "); a zt checkpoint folder is continued with checkpoint.resume, or "
                      "written as one file by trainer export");
  }
  unsigned char prefix[kLengthPrefix] = {};
  if (ckpt::pread_full(fd, prefix, kLengthPrefix, 0) != kLengthPrefix) {
    reject("shorter than the 8-byte header length (" + std::to_string(file_size) + " bytes)");
  }
  uint64_t length = 0;
  for (int i = kLengthPrefix - 1; i >= 0; --i) length = (length << 8) | prefix[i];
  if (length < 2 || length > static_cast<uint64_t>(kMaxHeaderJson)) {
    reject("header length " + std::to_string(length) + " is not between 2 and " +
           std::to_string(kMaxHeaderJson));
  }
  const int64_t total = kLengthPrefix + static_cast<int64_t>(length);
  if (total > file_size) {
    throw IoError(path + ": shorter than its header says (" + std::to_string(file_size) +
                  " bytes, header alone " + std::to_string(total) +
                  "); the file is truncated: write it again");
  }
  header.resize(static_cast<size_t>(total));
  if (ckpt::pread_full(fd, header.data(), total, 0) != total) {
    throw IoError("cannot read the header of " + path + ": " + ckpt::errno_text(errno));
  }
}

void SafetensorsReader::Impl::parse_header() {
  if (header[kLengthPrefix] != '{') reject("the header does not start with '{'");
  // JSON lets an object repeat a key and nlohmann keeps the last; a tensor named twice would
  // mean two things, so the parser's callback notes a repeated name of the top-level object.
  std::set<std::string> names;
  std::string repeated;
  const nlohmann::json::parser_callback_t note_names =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !names.insert(parsed.get<std::string>()).second && repeated.empty()) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(header.begin() + kLengthPrefix, header.end(), note_names,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) reject("the header is not a JSON object");
  if (!repeated.empty()) reject("the header names '" + repeated + "' twice");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "__metadata__") {
      parse_entry(it.key(), it.value());
      continue;
    }
    if (!it.value().is_object()) reject("__metadata__ is not an object");
    for (auto m = it.value().begin(); m != it.value().end(); ++m) {
      if (!m.value().is_string()) reject("__metadata__ value '" + m.key() + "' is not a string");
      metadata[m.key()] = m.value().get<std::string>();
    }
  }
}

void SafetensorsReader::Impl::parse_entry(const std::string& name, const nlohmann::json& v) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) reject(where + " is not an object");
  const auto dtype = v.find("dtype");
  const auto shape = v.find("shape");
  const auto offsets = v.find("data_offsets");
  if (dtype == v.end() || !dtype->is_string()) reject(where + " has no dtype string");
  if (shape == v.end() || !shape->is_array()) reject(where + " has no shape array");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2) {
    reject(where + " has no data_offsets [begin, end]");
  }
  SafetensorsEntry e;
  e.name = name;
  e.dtype = dtype->get<std::string>();
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) reject(where + " has a bad dimension");
    e.shape.push_back(d.get<int64_t>());
  }
  for (const auto& o : *offsets) {
    if (!o.is_number_unsigned() || o.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      reject(where + " has a bad data offset");
    }
  }
  e.begin = (*offsets)[0].get<int64_t>();
  e.end = (*offsets)[1].get<int64_t>();
  const int64_t element = safetensors_element_size(e.dtype);
  if (element == 0) reject(where + " has unknown dtype '" + e.dtype + "'");
  const int64_t bytes = byte_size(e.shape, element);
  if (e.end < e.begin || bytes < 0 || e.end - e.begin != bytes) {
    reject(where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
           ") do not hold " + e.dtype + " of its shape (" + std::to_string(bytes) + " bytes)");
  }
  entries.push_back(std::move(e));
}

// Like Hugging Face's reader: tensors tile the data section exactly, no holes, no overlap, no
// trailing bytes, so a file means one thing.
void SafetensorsReader::Impl::check_layout() {
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  int64_t end = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].begin != end) {
      reject("tensor '" + entries[i].name + "' starts at byte " + std::to_string(entries[i].begin) +
             " of the data section, expected " + std::to_string(end) + " (a hole or an overlap)");
    }
    end = entries[i].end;
    index[entries[i].name] = i;
  }
  const int64_t data = file_size - static_cast<int64_t>(header.size());
  if (data < end) {
    throw IoError(path + ": shorter than its header says (" + std::to_string(file_size) +
                  " bytes, the tensors need " + std::to_string(end + header.size()) +
                  "); the file is truncated: write it again");
  }
  if (data > end) reject(std::to_string(data - end) + " bytes follow the last tensor");
}

SafetensorsReader::SafetensorsReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->read_header();
  impl_->parse_header();
  impl_->check_layout();
}

SafetensorsReader::~SafetensorsReader() = default;

const std::vector<SafetensorsEntry>& SafetensorsReader::entries() const { return impl_->entries; }

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->entries[it->second];
}

const std::map<std::string, std::string>& SafetensorsReader::metadata() const {
  return impl_->metadata;
}

void SafetensorsReader::read(const SafetensorsEntry& entry, int64_t offset, void* out,
                             int64_t bytes) const {
  check_range("tensor '" + entry.name + "'", offset, bytes, entry.end - entry.begin);
  const int64_t at = header_bytes() + entry.begin + offset;
  const int64_t got = ckpt::pread_full(impl_->fd, out, bytes, at);
  if (got != bytes) {
    throw IoError("cannot read " + std::to_string(bytes) + " bytes of tensor " + entry.name +
                  " from " + impl_->path + " at offset " + std::to_string(at) + ": " +
                  (got < 0 ? ckpt::errno_text(errno) : "the file ends early (truncated)"));
  }
}

int64_t SafetensorsReader::header_bytes() const {
  return static_cast<int64_t>(impl_->header.size());
}
const std::string& SafetensorsReader::header() const { return impl_->header; }
const std::string& SafetensorsReader::path() const { return impl_->path; }

}  // namespace zt
