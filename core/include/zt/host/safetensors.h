// Safetensors files (Hugging Face's format: an 8-byte little-endian header length, a JSON header
// naming every tensor's dtype, shape and byte range, then the bytes), written and read in a
// streaming way: a writer declares every tensor first (the header must come first), then writes
// each tensor's bytes in parts; a reader parses the header and reads one tensor, or a byte range
// of it, at a time. Neither ever holds more than the caller hands it, so a file larger than memory
// is fine. zt uses it for checkpoint rank files and for `trainer export` / model.init_from.
// Thread safety: one thread per object.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zt/api.h"

namespace zt {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;           // "F32", "BF16", "F16", "I64", ...
  std::vector<int64_t> shape;  // row-major; {} is a scalar
  int64_t begin = 0, end = 0;  // byte range in the data section (after the header)
};

// The longest JSON header a reader takes (Hugging Face's own reader refuses longer ones: a
// larger length means "not this format"), and so the longest header with its length prefix.
inline constexpr int64_t kSafetensorsMaxHeaderJson = 100'000'000;
inline constexpr int64_t kSafetensorsMaxHeaderBytes = 8 + kSafetensorsMaxHeaderJson;

// Bytes per element of a safetensors dtype name; 0 for one zt does not know.
ZT_API int64_t safetensors_element_size(const std::string& dtype);

class ZT_API SafetensorsWriter {
 public:
  // Nothing is created until open().
  SafetensorsWriter();
  ~SafetensorsWriter();  // closes the file (without fsync) if still open
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Declares the next tensor; its bytes follow the previous one's. Returns its index.
  // Throws InternalError for a duplicate name or an unknown dtype.
  int64_t add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape);
  // Free-form string metadata ("__metadata__"), before open().
  void set_metadata(const std::string& key, const std::string& value);
  // Creates `path` (truncating) and writes the header, padded with spaces so the data section
  // starts at a multiple of `data_alignment` bytes (the format allows trailing spaces).
  // Throws IoError naming the path.
  void open(const std::string& path, int64_t data_alignment = 4096);
  // Bytes [offset, offset + bytes) of tensor `index`. Parts may come in any order; the caller
  // covers every byte. Throws IoError (naming the path, the tensor and the bytes: ENOSPC says
  // the disk is full) or InternalError for a range outside the tensor.
  void write(int64_t index, int64_t offset, const void* data, int64_t bytes);
  // Bytes [offset, offset + bytes) of the data section, across tensors: one call for a buffer
  // laid out as consecutive tensors (a checkpoint's snapshot). Throws as write().
  void write_data(int64_t offset, const void* data, int64_t bytes);
  // fsync (when `sync`) and close. Throws IoError naming the path.
  void close(bool sync = true);

  const std::vector<SafetensorsEntry>& entries() const;
  // Bytes of the header section (length prefix + JSON + padding): where the data section starts.
  int64_t header_bytes() const;
  // The whole file's size once open.
  int64_t file_bytes() const;
  // The header section's bytes as written (for checksumming it).
  const std::string& header() const;
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class ZT_API SafetensorsReader {
 public:
  // Opens and parses the header. Throws IoError (cannot open, shorter than its header says)
  // or ConfigError ("not a safetensors file": bad length, JSON that does not parse, offsets
  // outside the file), each naming the path.
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::vector<SafetensorsEntry>& entries() const;
  // The entry called `name`, or nullptr.
  const SafetensorsEntry* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const;
  // Bytes [offset, offset + bytes) of `entry` into `out`. Throws IoError on a short read,
  // naming the path and the tensor; InternalError for a range outside the tensor.
  void read(const SafetensorsEntry& entry, int64_t offset, void* out, int64_t bytes) const;
  int64_t header_bytes() const;
  // The header section's bytes as read (for checksumming it).
  const std::string& header() const;
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt
