// OffloadTier: a place where shard bytes live when they are not in compute memory (host RAM for
// offload_cpu, files on NVMe for offload_nvme). The engine tells the tier up front how many bytes
// it will place there (prepare), then allocates fixed-size regions (a group's fp32 master, each
// optimizer state, a parameter shard) and moves bytes between regions and host buffers with
// asynchronous reads and writes. A tier that is byte-addressable hands out the region's address,
// and the engine then works on those bytes in place instead of copying them.
//
// I/O contract (what O_DIRECT needs, stated once for every tier): offsets passed to read/write
// are multiples of alignment(); a transfer of `bytes` may move up to round_up(bytes, alignment())
// bytes, so the host buffer must have room for that (host_buffer() returns such buffers; they
// are also pinned when the tier runs beside CUDA). Regions are sized up to a multiple of
// alignment() by the tier.
//
// Errors: IoError naming the path (or tier), the region, the offset and bytes, and the step
// (set_step), with the way out. A region's backing that disappears or shrinks under a running
// job is an error at the next read (or at check()), never silently zeros.
// Thread safety: all calls from the training thread; the tier may complete Work on its own
// threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "zt/api.h"
#include "zt/plugin.h"
#include "zt/work.h"

namespace zt {

struct OffloadStats {
  int64_t bytes_allocated = 0;  // sum of live regions' sizes (as rounded by the tier)
  int64_t bytes_written = 0;    // since creation
  int64_t bytes_read = 0;
  int64_t writes = 0;           // completed write requests (as issued by the caller)
  int64_t reads = 0;
  int64_t staging_bytes = 0;    // host memory the tier itself holds for I/O (buffer pools)
};

// Where the tier is created: lets file tiers pick per-rank names and messages name the rank.
struct OffloadContext {
  int rank = 0;
  std::string role;   // the config key that selected it: "plugins.offload_optimizer", ...
  std::string job;    // unique per job (same on all ranks), for file and folder names
  bool cuda = false;  // host buffers should be pinned (a CUDA device computes)
};

class ZT_API OffloadTier {
 public:
  virtual ~OffloadTier();
  // One line for logs and the run summary, e.g. "files under runs/nvme (O_DIRECT, io_uring)".
  virtual std::string describe() const = 0;
  // Called once, before any allocate, with the total bytes this rank will place here. Checks the
  // place can hold them (writable, room), so a job fails before training, not at step 500.
  virtual void prepare(int64_t total_bytes) = 0;
  // A new region of `bytes` (zero-filled is NOT promised); `name` is used in messages.
  virtual int64_t allocate(const std::string& name, int64_t bytes) = 0;
  virtual void release(int64_t region) = 0;
  // The region's bytes when the tier is host memory; nullptr for tiers that are not addressable.
  virtual void* address(int64_t region) = 0;
  // Asynchronous copies; `host` must stay valid until the Work completed.
  virtual std::shared_ptr<Work> write(int64_t region, int64_t offset, const void* host,
                                      int64_t bytes) = 0;
  virtual std::shared_ptr<Work> read(int64_t region, int64_t offset, void* host,
                                     int64_t bytes) = 0;
  // A uint8 host tensor of at least `bytes` suited to this tier's I/O (aligned, pinned).
  virtual at::Tensor host_buffer(int64_t bytes) = 0;
  virtual int64_t alignment() const = 0;
  // Verifies every region's backing is still there and whole (files not deleted or truncated).
  virtual void check() = 0;
  // The training step being run, for messages ("... at step 12").
  virtual void set_step(int64_t step) = 0;
  virtual OffloadStats stats() const = 0;
};

// Factory of an offload plugin (kind ZT_KIND_OFFLOAD).
class ZT_API OffloadPlugin : public Plugin {
 public:
  virtual std::unique_ptr<OffloadTier> create(const Options& options,
                                              const OffloadContext& context) const = 0;
};

}  // namespace zt
