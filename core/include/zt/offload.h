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
// Errors: IoError when the storage refuses (no room, unwritable, deleted or truncated files, a
// failed or stalled transfer), naming the path (or tier), the region, the offset and bytes, and
// the step (set_step), with the way out. A region's backing that disappears or shrinks under a
// running job is an error at the next read (or at check()), never silently zeros. Misuse by
// the caller (an unknown region, a range outside it, a misaligned offset, a negative size) is
// InternalError naming the call and the values.
//
// Lifetime: the destructor waits for (or fails, completing their Work with an error) transfers
// still running, then frees every region still allocated and whatever else the tier holds
// (offload_nvme removes its files and folders). It runs when the job is failing too, so it
// must not throw.
//
// Thread safety: all calls from the training thread, one at a time; the tier may complete Work
// on its own threads, and that Work may be waited on from any thread.
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
  int64_t bytes_written = 0;    // since creation, as requested by the callers (not rounded)
  int64_t bytes_read = 0;
  int64_t writes = 0;  // completed write requests (as issued by the caller)
  int64_t reads = 0;
  int64_t staging_bytes = 0;  // host memory the tier itself holds for I/O (buffer pools)
};

// Where the tier is created: lets file tiers pick per-rank names and messages name the rank.
//
// File tiers: a plugin that declares a string option named `path` is taken by the trainer for
// a tier that keeps its bytes in files under that folder: they do not count against host
// memory in the trainer's memory-fit check, and after a job whose ranks were killed (so no
// destructor ran) the launcher removes <path>/zt-<job>. Keep every file under that folder, and
// a rank's files in a folder of its own there, open while the tier lives: a Python rank that
// leaves without its destructors under another launcher (torchrun) removes the folders holding
// files it has open, while the other ranks' may still be in use.
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
  // Never throws.
  virtual std::string describe() const = 0;
  // Says how many bytes are coming, so a place that cannot hold them fails before training.
  //   total_bytes: in, >= 0, the sum of the sizes of every region this rank will allocate here,
  //                each rounded up to alignment().
  // Called at most once, before the first allocate(); a tier that will get no region may never
  // see it (a tier must then still work if allocate() comes first, e.g. by preparing for 0).
  // Throws IoError: not writable, no room (naming the place, the bytes needed and free, and the
  // way out: another path, a smaller offload fraction, more ranks).
  virtual void prepare(int64_t total_bytes) = 0;
  // A new region.
  //   name:  in, for messages and file names (any characters; the tier sanitises them).
  //   bytes: in, >= 0; the tier may round the region up to a multiple of alignment().
  //   returns: the region's id, unique in this tier for its life (ids are not reused).
  // Contents are unspecified (zero-filled is NOT promised): the caller writes before it reads.
  // Throws IoError when the space cannot be had (naming the region and bytes).
  virtual int64_t allocate(const std::string& name, int64_t bytes) = 0;
  // Frees a region; the id becomes invalid. Transfers still running on it finish first or are
  // failed; their Work still completes.
  //   region: in, an id from allocate() not yet released.
  // Throws InternalError for an unknown id (offload_cpu ignores it).
  virtual void release(int64_t region) = 0;
  // The region's bytes when the tier is host memory, so the engine (and the CPU optimizer)
  // works on them in place; nullptr for tiers that are not addressable (files), whose bytes
  // only move through read()/write().
  //   region: in, a live region id.
  //   returns: an address valid until release(region), aligned to alignment(), or nullptr.
  // Throws InternalError for an unknown id.
  virtual void* address(int64_t region) = 0;
  // Asynchronous copy of host memory into a region.
  //   region: in, a live region id.
  //   offset: in, byte offset in the region, a multiple of alignment().
  //   host:   in, the source; may be null only when bytes == 0. The tier may read up to
  //           round_up(bytes, alignment()) bytes from it, and it must stay valid and unchanged
  //           until the Work completed.
  //   bytes:  in, >= 0; offset + round_up(bytes, alignment()) must lie inside the region.
  //   returns: the transfer's Work (an IoWork), never null; its wait() throws the transfer's
  //            IoError, or an IoError when the storage stalled.
  // Throws InternalError at the call for a bad region or range. Transfers may run concurrently,
  // except that a transfer overlapping an earlier unfinished one on the same region (where
  // either writes) starts after it: a read issued after a write of the same bytes sees them.
  virtual std::shared_ptr<Work> write(int64_t region, int64_t offset, const void* host,
                                      int64_t bytes) = 0;
  // Asynchronous copy of a region's bytes into host memory.
  //   host: out, the destination; room for round_up(bytes, alignment()) bytes, valid until the
  //         Work completed. Bytes past `bytes` may be overwritten.
  //   the other parameters, the result and the errors: as write(). A region whose backing
  //   vanished or shrank fails the Work with IoError, never with zeros.
  virtual std::shared_ptr<Work> read(int64_t region, int64_t offset, void* host, int64_t bytes) = 0;
  // A host buffer suited to this tier's I/O.
  //   bytes: in, >= 0.
  //   returns: a contiguous uint8 CPU tensor of at least round_up(bytes, alignment()) bytes,
  //            aligned to alignment() (pinned when OffloadContext::cuda and the tier supports
  //            it); owned by the caller.
  // Throws IoError when the memory cannot be had; InternalError for bytes < 0.
  virtual at::Tensor host_buffer(int64_t bytes) = 0;
  // The I/O granule in bytes (>= 1; 4096 or the device's logical block for files, the page for
  // host memory): offsets, region sizes and transfer lengths are rounded to it. Never throws.
  virtual int64_t alignment() const = 0;
  // Verifies every region's backing is still there and whole (files not deleted or truncated).
  // The engine calls it before each optimizer step. Throws IoError naming the file, its size
  // and the step.
  virtual void check() = 0;
  // The training step being run, for messages ("... at step 12").
  //   step: in, 1-based. Never throws.
  virtual void set_step(int64_t step) = 0;
  // Counters since creation. Never throws.
  virtual OffloadStats stats() const = 0;
};

// Factory of an offload plugin (kind ZT_KIND_OFFLOAD).
class ZT_API OffloadPlugin : public Plugin {
 public:
  // Makes this rank's tier. Not collective: each rank makes its own. One tier may serve both
  // roles when the same plugin is selected for both (the engine then prepares it once).
  //   options: in, the validated [plugin.<id>] table (every declared key present).
  //   context: in, this rank, the role, the job id and whether CUDA computes.
  //   returns: the tier, never null. It may create nothing on disk before prepare()/allocate().
  // Throws ConfigError for option values only known to be wrong here (e.g. block_kb not a
  // multiple of the device's block), IoError when the place cannot be used at all.
  virtual std::unique_ptr<OffloadTier> create(const Options& options,
                                              const OffloadContext& context) const = 0;
};

}  // namespace zt
