// A rank's way into its job, the same for `trainer` and the Python package: the bound on every
// wait (launch.timeout_s) and rank 0's store at MASTER_ADDR:MASTER_PORT, from the launcher's
// environment (torchrun, zt's launcher, mpirun, srun), else [launch]; a job of one process picks
// a free port and is its own job (ZT_JOB_ID, which offload files are named after).
// Thread safety: call once per process, from its main thread (it may set an environment
// variable).
#pragma once

#include <chrono>
#include <memory>

#include "zt/config.h"
#include "zt/rendezvous.h"
#include "zt/store.h"

namespace zt::trainer {

struct JobStore {
  std::chrono::milliseconds timeout{0};
  std::unique_ptr<Store> store;
};

// Collective: every rank of the job calls it. Throws ConfigError for a job of several ranks with
// no port to meet at, CommError from the rendezvous.
JobStore join_job_store(const Config& config, const RankEnv& env);

}  // namespace zt::trainer
