#include "util/posix_file.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "util/save_io_limit.h"
#include "zt/error.h"

namespace zt::ckpt {

namespace {

// One system call moves at most this much, so sizes stay far from ssize_t's limits and a
// failure reports the position it reached.
constexpr int64_t kMaxTransfer = int64_t{1} << 30;

}  // namespace

std::string errno_text(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

int pwrite_full(int fd, const void* data, int64_t bytes, int64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pwrite(fd, p, static_cast<size_t>(std::min(bytes, kMaxTransfer)), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENOSPC;  // a regular file takes no bytes only when the device is full
    p += n;
    bytes -= n;
    offset += n;
  }
  return 0;
}

int pwrite_watched(int fd, const void* data, int64_t bytes, int64_t offset,
                   const std::string& path) {
  static_assert(kSaveIoChunkBytes % kDirectAlignment == 0, "direct chunks must stay aligned");
  int err = 0;
  for (int64_t done = 0; done < bytes && err == 0;) {
    const int64_t chunk = std::min(bytes - done, kSaveIoChunkBytes);
    const SaveIoDeadline deadline("writing " + std::to_string(chunk) + " bytes at offset " +
                                  std::to_string(offset + done) + " of " + path);
    err = pwrite_full(fd, static_cast<const char*>(data) + done, chunk, offset + done);
    done += chunk;
  }
  return err;
}

int pwrite_direct(const std::string& path, const void* data, int64_t bytes, int64_t offset) {
  if (bytes == 0) return 0;
  int fd = -1;
  int open_err = 0;
  {
    const SaveIoDeadline deadline("opening " + path);
    fd = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
    open_err = errno;  // before the deadline's end, which may change it
  }
  if (fd < 0) return open_err;
  int err = pwrite_watched(fd, data, bytes, offset, path);
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

void SequentialDirectWriter::Free::operator()(char* p) const { std::free(p); }

SequentialDirectWriter::SequentialDirectWriter(std::string path, int64_t file_offset,
                                               BufferedWrite buffered, int64_t staging_bytes)
    : path_(std::move(path)),
      position_(file_offset),
      buffered_(std::move(buffered)),
      capacity_(std::max(staging_bytes / kDirectAlignment, int64_t{2}) * kDirectAlignment) {
  void* p = nullptr;
  if (::posix_memalign(&p, static_cast<size_t>(kDirectAlignment), static_cast<size_t>(capacity_)) !=
      0) {
    throw IoError("checkpoint: cannot allocate " + std::to_string(capacity_) +
                  " bytes of staging memory for " + path_);
  }
  staging_.reset(static_cast<char*>(p));
  const SaveIoDeadline deadline("opening " + path_);
  direct_fd_ = ::open(path_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  direct_ok_ = direct_fd_ >= 0;
}

SequentialDirectWriter::~SequentialDirectWriter() {
  if (direct_fd_ < 0) return;
  const SaveIoDeadline deadline("closing " + path_);  // NFS writes back at close
  ::close(direct_fd_);
}

void SequentialDirectWriter::append(const void* data, int64_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const int64_t n = std::min(bytes, capacity_ - staged_);
    std::memcpy(staging_.get() + staged_, p, static_cast<size_t>(n));
    staged_ += n;
    p += n;
    bytes -= n;
    if (staged_ == capacity_) drain(/*all=*/false);
  }
}

void SequentialDirectWriter::flush() { drain(/*all=*/true); }

// Writes the staged bytes: an unaligned head through the page cache (so the rest starts on a
// block of the file), whole blocks direct, and the rest kept for the next blocks (or, with
// `all`, written through the page cache too).
void SequentialDirectWriter::drain(bool all) {
  char* base = staging_.get();
  auto consume = [&](int64_t n) {
    std::memmove(base, base + n, static_cast<size_t>(staged_ - n));
    position_ += n;
    staged_ -= n;
  };
  const int64_t head = std::min(
      staged_, (kDirectAlignment - position_ % kDirectAlignment) % kDirectAlignment);
  if (head > 0) {
    buffered_(position_, base, head);
    consume(head);
  }
  const int64_t blocks = staged_ / kDirectAlignment * kDirectAlignment;
  if (blocks > 0 && direct_ok_) {
    const int err = pwrite_watched(direct_fd_, base, blocks, position_, path_);
    if (err == EINVAL) {
      direct_ok_ = false;  // the filesystem refuses direct I/O after all
    } else if (err != 0) {
      throw IoError("cannot write " + std::to_string(blocks) + " bytes to " + path_ +
                    " at offset " + std::to_string(position_) + ": " + errno_text(err) +
                    write_way_out(err, "point checkpoint.dir elsewhere"));
    } else {
      consume(blocks);
    }
  }
  if ((all || !direct_ok_) && staged_ > 0) {
    buffered_(position_, base, staged_);
    consume(staged_);
  }
}

int64_t pread_full(int fd, void* data, int64_t bytes, int64_t offset) {
  char* p = static_cast<char*>(data);
  int64_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pread(fd, p + done, static_cast<size_t>(std::min(bytes - done, kMaxTransfer)),
                        offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += n;
  }
  return done;
}

uint32_t crc32_update(uint32_t crc, const void* data, int64_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (bytes > 0) {
    auto n = static_cast<uInt>(std::min<int64_t>(bytes, std::numeric_limits<uInt>::max() / 2));
    c = ::crc32(c, p, n);
    p += n;
    bytes -= n;
  }
  return static_cast<uint32_t>(c);
}

std::string crc32_hex(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", crc);
  return text;
}

std::string write_way_out(int err, const std::string& elsewhere) {
  if (err == ENOSPC) return "; the disk is full: free space or " + elsewhere;
  if (err == EDQUOT) return "; the disk quota is used up: free space under it or " + elsewhere;
  return "; check the storage";
}

void fsync_file(int fd, const std::string& path) {
  if (::fsync(fd) != 0) {
    const int err = errno;
    // A network file system reports a full disk at the fsync that flushes the pages.
    throw IoError("cannot fsync " + path + ": " + errno_text(err) +
                  (err == ENOSPC || err == EDQUOT
                       ? write_way_out(err, "write elsewhere")
                       : "; the storage refused to make the file durable"));
  }
}

void fsync_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open folder " + path + " to fsync it: " + errno_text(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some filesystems (and /proc-like mounts) do not sync folders; the data itself is synced.
  if (rc != 0 && err != EINVAL && err != ENOTSUP) {
    throw IoError("cannot fsync folder " + path + ": " + errno_text(err));
  }
}

std::string write_replacement(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw IoError("cannot create " + tmp + ": " + errno_text(err) +
                  (err == ENOSPC || err == EDQUOT ? write_way_out(err, "write elsewhere") : ""));
  }
  int err = pwrite_full(fd, text.data(), static_cast<int64_t>(text.size()), 0);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  ::close(fd);
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw IoError("cannot write " + path + " (" + std::to_string(text.size()) +
                  " bytes): " + errno_text(err) + write_way_out(err, "write elsewhere"));
  }
  return tmp;
}

void commit_replacement(const std::string& tmp, const std::string& path) {
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw IoError("cannot rename " + tmp + " over " + path + ": " + errno_text(err));
  }
  fsync_dir(std::filesystem::path(path).parent_path().string());
}

void replace_file_atomically(const std::string& path, const std::string& text) {
  commit_replacement(write_replacement(path, text), path);
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read " + path + ": " + errno_text(errno));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw IoError("cannot read " + path + ": " + errno_text(errno));
  return s.str();
}

int64_t free_bytes(const std::string& path) {
  struct statvfs s;
  if (::statvfs(path.c_str(), &s) != 0) return -1;
  return static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
}

}  // namespace zt::ckpt
