// POSIX file plumbing for checkpoints and safetensors files: whole-buffer pread/pwrite that
// survive EINTR and short transfers, crc32 (zlib's) of any size, fsync of files and folders,
// small files replaced atomically, free space. Kept apart so the formats above read as formats.
// Thread safety: free functions without shared state; pread/pwrite on one fd from several
// threads are safe (they do not move the file offset).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace zt::ckpt {

// "No space left on device (errno 28)".
std::string errno_text(int err);
// What to do about a failed write, after its errno: a full disk or a used-up quota (EDQUOT,
// which statvfs's free space does not show) asks for room or another place (`elsewhere`, e.g.
// "point checkpoint.dir elsewhere"), anything else to check the storage. Starts with "; ".
std::string write_way_out(int err, const std::string& elsewhere);

// Writes all `bytes` at `offset`. Returns 0, or the errno of the failure (ENOSPC when a write
// makes no progress).
int pwrite_full(int fd, const void* data, int64_t bytes, int64_t offset);
// pwrite_full in chunks of at most kSaveIoChunkBytes (a multiple of kDirectAlignment, so a
// direct write's chunks stay aligned), each bounded on a saving thread (util/save_io_limit.h) and
// named there by `path`. Returns 0, or the errno of the chunk that failed.
int pwrite_watched(int fd, const void* data, int64_t bytes, int64_t offset,
                   const std::string& path);
// Reads up to `bytes` at `offset`, stopping early only at end of file. Returns the bytes read,
// or -1 with errno set.
int64_t pread_full(int fd, void* data, int64_t bytes, int64_t offset);

// The granule direct I/O needs for offsets, lengths and buffer addresses on the filesystems zt
// writes checkpoints to (the logical block of common devices and the page).
constexpr int64_t kDirectAlignment = 4096;

// Writes `bytes` at `offset` of `path` (an existing file) with O_DIRECT, bypassing the page
// cache: on the disks measured here that is several times faster than buffered writes plus
// fsync. REQUIRES: offset, bytes and `data`'s address multiples of kDirectAlignment. Returns 0,
// EINVAL when the filesystem refuses direct I/O (tmpfs; the caller then writes buffered), or
// the errno of the failure.
int pwrite_direct(const std::string& path, const void* data, int64_t bytes, int64_t offset);

// Bytes written one after the other from a file offset on, gathered in an aligned staging buffer
// so that whole blocks go to disk with direct I/O (what a synchronous save writes, piece after
// piece, and the streamed pieces of an asynchronous one). The unaligned head and tail, and all
// of it where the filesystem refuses direct I/O, go through `buffered` (a page-cache write at a
// file offset that throws IoError on failure).
class SequentialDirectWriter {
 public:
  using BufferedWrite = std::function<void(int64_t file_offset, const char* data, int64_t bytes)>;
  // `path` is the file (already created); writing starts at `file_offset`.
  SequentialDirectWriter(std::string path, int64_t file_offset, BufferedWrite buffered,
                         int64_t staging_bytes = int64_t{8} << 20);
  ~SequentialDirectWriter();
  SequentialDirectWriter(const SequentialDirectWriter&) = delete;
  SequentialDirectWriter& operator=(const SequentialDirectWriter&) = delete;

  // The next `bytes` of the file. Throws IoError naming the file (ENOSPC: the disk is full).
  void append(const void* data, int64_t bytes);
  // Writes what is staged. Call once at the end; append() must not follow.
  void flush();
  // The file offset the next append() writes at.
  int64_t position() const { return position_ + staged_; }

 private:
  void drain(bool all);

  std::string path_;
  int64_t position_;  // file offset of the first staged byte
  BufferedWrite buffered_;
  int64_t capacity_;
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> staging_;
  int64_t staged_ = 0;
  int direct_fd_ = -1;  // -1 after the filesystem refused O_DIRECT: everything goes buffered
  bool direct_ok_ = true;
};

// zlib's crc32, continued from `crc` (0 starts one), over any number of bytes.
uint32_t crc32_update(uint32_t crc, const void* data, int64_t bytes);
// "1a2b3c4d": how crc32s are spelled in manifests.
std::string crc32_hex(uint32_t crc);

// fsync of an open file; throws IoError naming `path`.
void fsync_file(int fd, const std::string& path);
// fsync of a folder, so renames and new entries in it survive a crash; throws IoError.
void fsync_dir(const std::string& path);
// Writes `text` to `path` through a temporary file in the same folder, fsyncs it, renames it
// over `path` and fsyncs the folder: readers see the old text or the new one, never a part.
void replace_file_atomically(const std::string& path, const std::string& text);
// replace_file_atomically in two halves, for a caller that must do something between them:
// write_replacement leaves `text` fsynced in path.tmp-<pid> and returns that name;
// commit_replacement renames it over `path` and fsyncs the folder (it unlinks `tmp` when the
// rename fails). Both throw IoError naming the paths.
std::string write_replacement(const std::string& path, const std::string& text);
void commit_replacement(const std::string& tmp, const std::string& path);
// The whole file; throws IoError naming `path` when it cannot be read.
std::string read_whole_file(const std::string& path);
// Bytes an unprivileged writer may still use on the filesystem holding `path` (statvfs);
// -1 when that cannot be told.
int64_t free_bytes(const std::string& path);

}  // namespace zt::ckpt
