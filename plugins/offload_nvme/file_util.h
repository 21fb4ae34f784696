// offload_nvme's small file-system helpers: names that are safe as file names, errno spelled
// for messages, the file system and block size behind a path. Stateless and thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace zt::nvme {

// `name` with every character outside [A-Za-z0-9._-] replaced by '_', at most 96 characters, not
// starting with '.' (no hidden files, no "..") and never empty: region names come from the engine
// ("layers.3.attn/qkv:exp_avg") and must become one path component.
std::string sanitize_file_name(const std::string& name);

// "No space left on device (ENOSPC)".
std::string errno_text(int error_number);

// The file system holding `path` by its usual name ("ext4", "tmpfs", "ramfs", "xfs", ...), or
// "file system type 0x..." when unknown; "unknown file system" when statfs fails.
std::string file_system_name(const std::string& path);

// The logical block size of the block device holding `path` or its nearest existing ancestor
// (from /sys/dev/block), or 0 when there is none (tmpfs, network file systems) or it is unknown.
int64_t logical_block_size(const std::string& path);

// Bytes an unprivileged writer may still use on the file system of `path` (statvfs f_bavail *
// f_frsize), INT64_MAX when the file system reports no size (ramfs), or -1 with errno set when
// statvfs fails.
int64_t free_bytes(const std::string& path);

}  // namespace zt::nvme
