// A whole file mapped read-only. Pages come in on first touch, so opening a large corpus costs
// nothing up front, and processes on one host (ranks, prepare-data's readers) share the page
// cache. Thread safety: immutable after construction; reads from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zt::data {

class MappedFile {
 public:
  // `what` names the file in errors ("data file 'x' (data.path at job.toml:3:1)"); `key` is the
  // setting or argument that named it, for the way out. IoError when it cannot be opened, is not
  // a regular file, or cannot be mapped.
  MappedFile(const std::string& path, const std::string& what, const std::string& key);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace zt::data
