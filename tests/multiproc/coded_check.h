// The coded collectives (core/src/zero/coded_collectives.h) over a real communicator, against
// the same quantization computed in this one process with the codec itself: every rank's decoded
// shard in a coded all-gather, and a coded reduce-scatter's sum (rank order, fp32, the rank's own
// chunk exact) and error-feedback residual, bit for bit; and the bytes each moves, from the
// communicator's counters, against fp32's. One scenario of zt_comm_check.
#pragma once

#include "zt/communicator.h"
#include "zt/host/plugin_loader.h"

namespace zt::test {

// Throws CheckFailed naming the op, codec, length and rank of the first mismatch.
void run_coded_collectives(Communicator& comm, PluginCatalog& catalog);

}  // namespace zt::test
