// The rank side of zt_bench_comm: times comm_ucx (loaded from the plugin catalog) and
// LibTorch's ProcessGroupGloo on the same buffers in the same process, interleaved.
// Thread safety: run_collectives drives both backends from the calling thread.
#pragma once

#include <vector>

#include "bench_comm.h"
#include "zt/host/rendezvous.h"

namespace zt::bench {

// Collective over the ranks of `env` (each rank calls it). Returns the rows timed on this
// rank; rank 0's are the ones reported. Throws zt::Error on any failure.
std::vector<Row> run_collectives(const Plan& plan, const RankEnv& env);

}  // namespace zt::bench
