// MemoryLedger: the engine's account of the bytes it owns (MemoryReport), kept where memory is
// allocated or freed. Stage 3 gathers and releases parameters all through a step, so the ledger
// keeps the gathered bytes' peak as they move, and so it does for the host buffers that stream
// tiers (staging), which come and go with tiles and read-ahead: their peak is what a memory-fit
// check must plan for. It refuses to go negative: a release that was never gathered is an
// accounting bug, reported instead of silently skewing the summary. It also carries the engine's
// clock (EngineTimes), since every piece that waits on I/O already holds the ledger.
// Thread safety: one thread (the training thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "zero/engine_clock.h"
#include "zt/host/engine_types.h"
#include "zt/offload.h"

namespace zt {

class MemoryLedger {
 public:
  // Fixed categories (shards, states, grads, tiers), filled while the engine is built.
  MemoryReport& fixed() { return report_; }
  const MemoryReport& report() const { return report_; }

  // Parameter bytes materialised (gathered) or freed; the peak follows the first.
  void gathered(int64_t bytes);
  void released(int64_t bytes);
  // Host buffers that stream tiles or hold shards read ahead, as they come and go; the peak
  // follows the first.
  void staging_added(int64_t bytes);
  void staging_freed(int64_t bytes);
  // The peak restarts from what is gathered now (after the engine's initial release).
  void restart_peak() { report_.params_gathered_peak = report_.params_gathered; }

  EngineClock& clock() { return clock_; }
  const EngineClock& clock() const { return clock_; }

 private:
  MemoryReport report_;
  EngineClock clock_;
};

// A host buffer of a tier (OffloadTier::host_buffer: aligned, room for whole I/O granules),
// counted as staging in the ledger for as long as it lives. Movable, so sets of them can live in
// containers; a moved-from buffer holds and counts nothing.
class StagingBuffer {
 public:
  StagingBuffer(OffloadTier& tier, int64_t bytes, MemoryLedger& ledger);
  ~StagingBuffer();
  StagingBuffer(StagingBuffer&& other) noexcept;
  StagingBuffer& operator=(StagingBuffer&&) = delete;
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  void* data() const { return buffer_.data_ptr(); }
  const at::Tensor& tensor() const { return buffer_; }

 private:
  MemoryLedger* ledger_;
  at::Tensor buffer_;
};

}  // namespace zt
