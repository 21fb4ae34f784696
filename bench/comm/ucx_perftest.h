// The raw point-to-point limit for zt_bench_comm: UCX's own ucx_perftest (Debian ucx-utils)
// tag_bw between a server and a client on this host, one pair per size and repetition.
// Every child process is bounded by a deadline and killed past it; none outlives the bench.
// Thread safety: run_ucx_perftest spawns and reaps children; call it from one thread.
#pragma once

#include <string>
#include <vector>

#include "bench_comm.h"

namespace zt::bench {

// The ucx_perftest on PATH; throws IoError saying how to install it when there is none.
std::string find_ucx_perftest();

// One row per size (backend "ucx_perftest", op "tag_bw"), the median over plan.reps runs.
// `scratch_dir` holds the children's output. Throws zt::Error when ucx_perftest is missing or
// a run fails, with the run's output.
std::vector<Row> run_ucx_perftest(const Plan& plan, const std::string& scratch_dir);

// Bytes/s from the client's "Final:" line (overall bandwidth, in MB/s = MiB/s); throws
// IoError when `output` has none.
double parse_perftest_final(const std::string& output);

}  // namespace zt::bench
