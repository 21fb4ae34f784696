// POSIX file plumbing for checkpoints and safetensors files: whole-buffer pread/pwrite that
// survive EINTR and short transfers, crc32 (zlib's) of any size, fsync of files and folders,
// small files replaced atomically, free space. Kept apart so the formats above read as formats.
// Thread safety: free functions without shared state; pread/pwrite on one fd from several
// threads are safe (they do not move the file offset).
#pragma once

#include <cstdint>
#include <string>

namespace zt::ckpt {

// "No space left on device (errno 28)".
std::string errno_text(int err);

// Writes all `bytes` at `offset`. Returns 0, or the errno of the failure (ENOSPC when a write
// makes no progress).
int pwrite_full(int fd, const void* data, int64_t bytes, int64_t offset);
// Reads up to `bytes` at `offset`, stopping early only at end of file. Returns the bytes read,
// or -1 with errno set.
int64_t pread_full(int fd, void* data, int64_t bytes, int64_t offset);

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
// The whole file; throws IoError naming `path` when it cannot be read.
std::string read_whole_file(const std::string& path);
// Bytes an unprivileged writer may still use on the filesystem holding `path` (statvfs);
// -1 when that cannot be told.
int64_t free_bytes(const std::string& path);

}  // namespace zt::ckpt
