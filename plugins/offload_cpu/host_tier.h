// HostTier: offload_cpu's tier. Regions are page-aligned host allocations (pinned through
// LibTorch's CUDA host allocator when a CUDA device computes, so copies to it can run
// asynchronously); the engine works on them in place through address(), so reads and writes
// are plain copies that complete before they return.
// Thread safety: one thread (the training thread), as OffloadTier requires.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "zt/offload.h"

namespace zt::offload_cpu {

class HostTier final : public OffloadTier {
 public:
  // `pin`: allocate page-locked memory (needs a CUDA-enabled LibTorch); otherwise page-aligned.
  HostTier(const OffloadContext& context, bool pin);
  ~HostTier() override;

  std::string describe() const override;
  void prepare(int64_t total_bytes) override;
  int64_t allocate(const std::string& name, int64_t bytes) override;
  void release(int64_t region) override;
  void* address(int64_t region) override;
  std::shared_ptr<Work> write(int64_t region, int64_t offset, const void* host,
                              int64_t bytes) override;
  std::shared_ptr<Work> read(int64_t region, int64_t offset, void* host, int64_t bytes) override;
  at::Tensor host_buffer(int64_t bytes) override;
  int64_t alignment() const override { return kPage; }
  // Host memory cannot vanish or shrink under the job: nothing to verify.
  void check() override {}
  void set_step(int64_t step) override { step_ = step; }
  OffloadStats stats() const override { return stats_; }

 private:
  static constexpr int64_t kPage = 4096;
  struct Region {
    std::string name;
    int64_t bytes = 0;
    at::Tensor memory;  // uint8, owns the allocation
  };
  at::Tensor allocate_bytes(int64_t bytes) const;
  Region& region(int64_t id, int64_t offset, int64_t bytes, const char* op,
                 const void* host = nullptr);

  OffloadContext context_;
  bool pin_;
  int64_t step_ = 0;
  int64_t next_id_ = 0;
  std::map<int64_t, Region> regions_;
  OffloadStats stats_;
};

}  // namespace zt::offload_cpu
