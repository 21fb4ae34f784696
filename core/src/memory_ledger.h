// MemoryLedger: the engine's account of the bytes it owns (MemoryReport), kept where memory is
// allocated or freed. Stage 3 gathers and releases parameters all through a step, so the ledger
// keeps the gathered bytes' peak as they move, and refuses to go negative: a release that was
// never gathered is an accounting bug, reported instead of silently skewing the summary.
// Thread safety: one thread (the training thread).
#pragma once

#include <cstdint>

#include "zt/engine.h"

namespace zt {

class MemoryLedger {
 public:
  // Fixed categories (shards, states, grads, tiers), filled while the engine is built.
  MemoryReport& fixed() { return report_; }
  const MemoryReport& report() const { return report_; }

  // Parameter bytes materialised (gathered) or freed; the peak follows the first.
  void gathered(int64_t bytes);
  void released(int64_t bytes);
  // Host buffers that stream tiles or hold shards read ahead, as they come and go.
  void staging_added(int64_t bytes);
  void staging_freed(int64_t bytes);
  // The peak restarts from what is gathered now (after the engine's initial release).
  void restart_peak() { report_.params_gathered_peak = report_.params_gathered; }

 private:
  MemoryReport report_;
};

}  // namespace zt
