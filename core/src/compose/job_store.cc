// join_job_store: the rendezvous a rank joins, from its launcher's environment or [launch].
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "launch/loopback_listener.h"
#include "zt/error.h"
#include "zt/host/compose.h"
#include "zt/host/launcher.h"

namespace zt {

JobStore join_job_store(const LaunchSettings& launch, const RankEnv& env) {
  if (!env.found && !std::getenv("ZT_JOB_ID")) setenv("ZT_JOB_ID", draw_job_id().c_str(), 1);
  JobStore job;
  job.timeout = launch.timeout;
  const std::string addr = env.master_addr.empty() ? launch.master_addr : env.master_addr;
  int port = env.master_port > 0 ? env.master_port : launch.master_port;
  // Open MPI 5's mpirun (PRRTE) gives its ranks no address of its own to derive both from.
  const std::string openmpi5 =
      env.source == "openmpi" && env.cluster_job.empty()
          ? " (Open MPI 5's mpirun gives no address zt can derive them from: mpirun -x "
            "MASTER_ADDR=$(hostname) -x MASTER_PORT=29500 ...)"
          : "";
  if (port == 0) {
    if (env.world > 1) {
      throw ConfigError(env.source + " environment with " + std::to_string(env.world) +
                        " ranks but no MASTER_PORT and launch.master_port = 0; set MASTER_PORT "
                        "(and MASTER_ADDR) for every rank" +
                        openmpi5 +
                        ", or let zt start them (trainer --nproc N, python3 -m zt.launch --nproc "
                        "N)");
    }
    port = pick_free_port(addr);
  }
  // A loopback rendezvous the ranks on other hosts cannot reach: they waited out
  // launch.timeout_s, then named a store that was never there for them.
  if (env.several_hosts && env.world > 1 && is_loopback_host(addr)) {
    const std::string from = env.master_addr.empty()
                                 ? "launch.master_addr = \"" + addr + "\" (no MASTER_ADDR is set)"
                                 : "MASTER_ADDR=" + addr;
    const std::string fix =
        env.source == "slurm"
            ? "unset MASTER_ADDR in the job script (zt then meets at the first host of the "
              "step's node list) or export rank 0's host name"
            : "export rank 0's host name as MASTER_ADDR to every rank (mpirun -x MASTER_ADDR=...)" +
                  openmpi5;
    throw ConfigError(from + " is this host's loopback, which the " + env.source +
                      " job's ranks on other hosts cannot reach; " + fix);
  }
  // The job's own environment left the rendezvous to zt: say how it was found, once.
  if (env.rank == 0 && !env.derivation.empty()) {
    std::printf("zt: rendezvous at %s:%d from the %s job (%s)\n", addr.c_str(), port,
                env.source.c_str(), env.derivation.c_str());
    std::fflush(stdout);
  }
  job.store = rendezvous(addr, port, env.rank, env.world, job.timeout, env.cluster_job);
  return job;
}

}  // namespace zt
