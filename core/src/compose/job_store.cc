// join_job_store: the rendezvous a rank joins, from its launcher's environment or [launch].
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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
  if (port == 0) {
    if (env.world > 1) {
      throw ConfigError(env.source + " environment with " + std::to_string(env.world) +
                        " ranks but no MASTER_PORT and launch.master_port = 0; set MASTER_PORT "
                        "(and MASTER_ADDR) for every rank, or let zt start them (trainer "
                        "--nproc N, python3 -m zt.launch --nproc N)");
    }
    port = pick_free_port(addr);
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
