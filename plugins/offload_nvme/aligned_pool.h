// AlignedPool: the bounce buffers of offload_nvme. O_DIRECT moves bytes between the device and
// memory aligned to the device's block; a caller's host pointer that is not aligned (a slice of
// a tensor, a std::vector) cannot take part in such a transfer, so its bytes are staged through
// one of these buffers instead. The pool is fixed (count x size, allocated once) so offloading
// never grows host memory behind the engine's accounting.
// Thread safety: none; the I/O thread is its only user.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::nvme {

// `bytes` (rounded up to `alignment`) of memory aligned to `alignment`, released with free().
// Throws IoError naming `what` and, after it, `way_out` (what the user can change for that
// allocation) when the allocation fails.
uint8_t* aligned_alloc_or_throw(int64_t bytes, int64_t alignment, const std::string& what,
                                const std::string& way_out);

// Memory the kernel may still write into (given to a request abandoned after a stall): never
// freed, since a late completion would corrupt whatever reused it, and kept reachable, so leak
// checkers do not report it. Thread-safe.
void keep_forever(void* memory);

class AlignedPool {
 public:
  // `count` buffers of `buffer_bytes` each (a multiple of `alignment`), aligned to `alignment`.
  AlignedPool(int count, int64_t buffer_bytes, int64_t alignment);
  ~AlignedPool();
  AlignedPool(const AlignedPool&) = delete;
  AlignedPool& operator=(const AlignedPool&) = delete;

  // A free buffer, or nullptr when all are in use (the caller retries after a release).
  uint8_t* acquire();
  // Gives back a buffer from acquire().
  void release(uint8_t* buffer);
  // Keeps every buffer from ever being freed, the destructor's included (keep_forever): for when
  // the kernel may still write into one (a request abandoned after a stall).
  void keep_all_forever();

  int64_t buffer_bytes() const { return buffer_bytes_; }
  int count() const { return static_cast<int>(all_.size()); }
  int free_count() const { return static_cast<int>(free_.size()); }
  int64_t total_bytes() const { return buffer_bytes_ * count(); }

 private:
  int64_t buffer_bytes_;
  std::vector<uint8_t*> all_;
  std::vector<uint8_t*> free_;
};

}  // namespace zt::nvme
