#include "setup/job_store.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "zt/error.h"
#include "zt/launcher.h"

namespace zt::trainer {

JobStore join_job_store(const Config& config, const RankEnv& env) {
  const Options& launch = config.section("launch");
  if (!env.found && !std::getenv("ZT_JOB_ID"))
    setenv("ZT_JOB_ID", std::to_string(getpid()).c_str(), 1);
  JobStore job;
  job.timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::llround(launch.get_double("timeout_s") * 1000)));
  const std::string addr = env.master_addr.empty() ? launch.get_string("master_addr")
                                                   : env.master_addr;
  int port = env.master_port > 0 ? env.master_port
                                 : static_cast<int>(launch.get_int("master_port"));
  if (port == 0) {
    if (env.world > 1) {
      throw ConfigError(env.source + " environment with " + std::to_string(env.world) +
                        " ranks but no MASTER_PORT and launch.master_port = 0; set MASTER_PORT "
                        "(and MASTER_ADDR) for every rank, or let zt start them (trainer "
                        "--nproc N, python3 -m zt.launch --nproc N)");
    }
    port = pick_free_port(addr);
  }
  job.store = rendezvous(addr, port, env.rank, env.world, job.timeout);
  return job;
}

}  // namespace zt::trainer
