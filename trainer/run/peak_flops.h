// The machine's peak for MFU: what a dense matrix multiply reaches on this rank's threads in the
// compute dtype, measured by a short probe at start while every rank of the host probes at once
// (they share its cores, as they do while training), and cached per machine so later runs start
// without it: <cache>/peak-flops.json, keyed by CPU model, threads, local ranks, dtype and BLAS
// core. The cache folder is ZT_CACHE_DIR, else $XDG_CACHE_HOME/zt, else ~/.cache/zt; a cache that
// cannot be written is only not used.
// Thread safety: the training thread.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

#include "zt/communicator.h"

namespace zt::trainer {

struct PeakFlops {
  double per_rank = 0;  // FLOP/s one rank reaches
  std::string how;      // "sgemm fp32 1024^3, 1 thread x 2 ranks, measured" / "..., cached"
  std::string cache_file, cache_key;  // where it is kept ("" = not cached)
  bool writes_cache = false;          // this rank writes the host's entry (local rank 0)
  bool raised = false;                // raise_peak raised it: keep_raised_peak writes it
};

// Collective: the ranks agree whether every one found its cache entry, else all probe together.
PeakFlops peak_flops(Communicator& comm, at::ScalarType dtype);

// A step's model FLOP/s above the peak shows that the probe ran while something else held the
// cores (a cached entry lives on across runs): the peak becomes the rate reached, so MFU never
// reads above 100%. In memory only (it runs every step); returns whether it rose.
bool raise_peak(PeakFlops& peak, double reached);

// At the run's end: a raised peak replaces the cache's entry for later runs.
void keep_raised_peak(const PeakFlops& peak);

}  // namespace zt::trainer
