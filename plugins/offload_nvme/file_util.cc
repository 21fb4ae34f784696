#include "file_util.h"

#include <linux/magic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

namespace zt::nvme {

std::string sanitize_file_name(const std::string& name) {
  constexpr size_t kMaxLength = 96;  // leaves room for "-<id>.bin" under NAME_MAX (255)
  std::string out;
  for (char c : name) {
    if (out.size() == kMaxLength) break;
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    out += safe ? c : '_';
  }
  if (out.empty()) return "region";
  if (out[0] == '.') out[0] = '_';
  return out;
}

std::string errno_text(int error_number) {
  const char* desc = strerrordesc_np(error_number);
  const char* name = strerrorname_np(error_number);
  std::string text = desc ? desc : "error " + std::to_string(error_number);
  if (name) text += std::string(" (") + name + ")";
  return text;
}

std::string file_system_name(const std::string& path) {
  struct statfs fs;
  if (statfs(path.c_str(), &fs) != 0) return "unknown file system";
  // The file systems people put offload folders on, or end up on by accident.
  switch (static_cast<unsigned long>(fs.f_type)) {
    case EXT4_SUPER_MAGIC: return "ext4";  // also ext2/ext3: one magic
    case XFS_SUPER_MAGIC: return "xfs";
    case BTRFS_SUPER_MAGIC: return "btrfs";
    case TMPFS_MAGIC: return "tmpfs";
    case RAMFS_MAGIC: return "ramfs";
    case OVERLAYFS_SUPER_MAGIC: return "overlayfs";
    case NFS_SUPER_MAGIC: return "nfs";
    case V9FS_MAGIC: return "9p";
    case FUSE_SUPER_MAGIC: return "fuse";
    case 0x2fc12fc1UL: return "zfs";
    case 0x6a656a63UL: return "virtiofs";
    case F2FS_SUPER_MAGIC: return "f2fs";
    default: break;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "file system type 0x%lx", static_cast<unsigned long>(fs.f_type));
  return buf;
}

namespace {

int64_t read_int(const std::string& file) {
  std::ifstream in(file);
  int64_t v = 0;
  return in >> v ? v : 0;
}

}  // namespace

int64_t logical_block_size(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) return 0;
  // The folder may not exist yet (prepare() makes it): its device is its nearest ancestor's.
  struct stat st;
  while (stat(p.c_str(), &st) != 0) {
    if (!p.has_relative_path()) return 0;
    p = p.parent_path();
  }
  const std::string dev = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                          std::to_string(minor(st.st_dev));
  // A whole disk has queue/ itself; a partition's queue/ is its parent disk's.
  if (int64_t v = read_int(dev + "/queue/logical_block_size")) return v;
  return read_int(dev + "/../queue/logical_block_size");
}

int64_t free_bytes(const std::string& path) {
  struct statvfs vfs;
  if (statvfs(path.c_str(), &vfs) != 0) return -1;
  // ramfs (and some FUSE file systems) report no size at all: they have no limit to check.
  if (vfs.f_blocks == 0) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
}

}  // namespace zt::nvme
