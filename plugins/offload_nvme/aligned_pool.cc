#include "aligned_pool.h"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "file_util.h"
#include "zt/bytes.h"
#include "zt/error.h"

namespace zt::nvme {

uint8_t* aligned_alloc_or_throw(int64_t bytes, int64_t alignment, const std::string& what,
                                const std::string& way_out) {
  // posix_memalign of 0 bytes may return null; one aligned block keeps "null means failed" true.
  const int64_t size = bytes > 0 ? round_up(bytes, alignment) : alignment;
  void* p = nullptr;
  const int rc = posix_memalign(&p, static_cast<size_t>(alignment), static_cast<size_t>(size));
  if (rc != 0 || !p) {
    throw IoError("offload_nvme: cannot allocate " + bytes_text(size) +
                  " of host memory aligned to " + std::to_string(alignment) + " bytes for " + what +
                  ": " + errno_text(rc) + "; " + way_out);
  }
  return static_cast<uint8_t*>(p);
}

AlignedPool::AlignedPool(int count, int64_t buffer_bytes, int64_t alignment)
    : buffer_bytes_(buffer_bytes) {
  try {
    for (int i = 0; i < count; ++i) {
      uint8_t* p = aligned_alloc_or_throw(
          buffer_bytes, alignment, "the bounce-buffer pool",
          "lower plugin.offload_nvme.buffer_count or buffer_mb, or free host memory");
      all_.push_back(p);
    }
  } catch (...) {
    for (uint8_t* p : all_) std::free(p);
    throw;
  }
  free_ = all_;
}

void keep_forever(void* memory) {
  static std::mutex mutex;
  static auto* kept = new std::vector<void*>();  // never destroyed: its entries stay reachable
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(memory);
}

void AlignedPool::keep_all_forever() {
  for (uint8_t* p : all_) keep_forever(p);
  all_.clear();
  free_.clear();
}

AlignedPool::~AlignedPool() {
  for (uint8_t* p : all_) std::free(p);
}

uint8_t* AlignedPool::acquire() {
  if (free_.empty()) return nullptr;
  uint8_t* p = free_.back();
  free_.pop_back();
  return p;
}

void AlignedPool::release(uint8_t* buffer) { free_.push_back(buffer); }

}  // namespace zt::nvme
