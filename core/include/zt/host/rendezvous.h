// Rank discovery and rendezvous. Ranks come from the launcher's environment, in this order:
// torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), OpenMPI
// (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, in
// a task srun started: SLURM_STEP_ID set; a batch script itself is no rank);
// MASTER_ADDR/MASTER_PORT, when set, override the config's launch.master_addr/port for all.
// Under Slurm without them, the address is the first host of SLURM_STEP_NODELIST (else
// SLURM_JOB_NODELIST), where rank 0 must run, and the port is derived from SLURM_JOB_ID and
// SLURM_STEP_ID (slurm_hostlist.h); under mpirun, mpirun's own host
// (OMPI_MCA_orte_hnp_uri), where rank 0 must run, and a port from Open MPI's job number.
// RankEnv::derivation says so, and rank 0 prints it.
// Rendezvous is LibTorch's c10d::TCPStore hosted by rank 0, bounded by a timeout.
// Thread safety: the Store returned is thread-safe; discovery is a pure function of env.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "zt/api.h"
#include "zt/communicator.h"
#include "zt/store.h"

namespace zt {

struct RankEnv {
  bool found = false;  // false: no launcher environment (single process or --nproc)
  std::string source;  // "torchrun", "zt launcher", "openmpi", "slurm", or "none"
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  // Ranks on this host (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, or Slurm's step layout
  // SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID, else SLURM_NTASKS_PER_NODE); 0 = not given.
  int local_world = 0;
  std::string master_addr;  // empty: use the config's launch.master_addr
  int master_port = 0;      // 0: use the config's launch.master_port
  // How master_addr/master_port were derived where the environment did not set them (Slurm),
  // e.g. "MASTER_ADDR gpu01, the first host of SLURM_JOB_NODELIST=gpu[01-04]"; empty otherwise.
  std::string derivation;
  // The cluster launcher's job this rank runs in: "slurm-JOB.STEP" (a task srun started) or
  // "ompi-JOB.0" (mpirun); "" under torchrun, zt's launcher or none, which pick their own ports.
  // rendezvous() keeps the job's store keys under it (see there).
  std::string cluster_job;
  // The launcher says the ranks run on more than one host: a Slurm step of several nodes
  // (SLURM_STEP_NUM_NODES, else SLURM_JOB_NUM_NODES), or mpirun's ranks not all on this one.
  // A loopback rendezvous address cannot serve them (join_job_store refuses it).
  bool several_hosts = false;

  // Started by zt's own launcher (trainer --nproc, python3 -m zt.launch), which checked the job
  // before it started any rank.
  bool zt_launched() const { return source == "zt launcher"; }
};

using GetEnv = std::function<const char*(const char*)>;
// Reads the environment through `getenv` (tests pass their own). Throws ConfigError for values
// that are present but malformed or inconsistent (e.g. RANK >= WORLD_SIZE).
ZT_API RankEnv discover_rank_env(const GetEnv& getenv);
ZT_API RankEnv discover_rank_env();

// Connects every rank to rank 0's TCPStore at addr:port (rank 0 hosts it) and waits until all
// `world` ranks have arrived. Under torchrun's agent (TORCHELASTIC_USE_AGENT_STORE=True) the
// agent hosts the store there and every rank is a client, zt's keys under a prefix per restart.
// Rank 0 returns only once every rank has seen all arrive: none is still polling the store it
// hosts when rank 0 goes on (and perhaps fails at once). Throws CommError: port in use, timeout
// with how many arrived. The store's own failures (a lost connection) are CommErrors too.
// `cluster_job` (RankEnv::cluster_job) prefixes the job's keys: two cluster jobs whose derived
// ports clash on one host then meet in one store without counting into each other's
// rendezvous; the job that came second fails (its rank 0 cannot listen, its other ranks wait in
// vain) and the first trains on.
ZT_API std::unique_ptr<Store> rendezvous(const std::string& addr, int port, int rank, int world,
                                         std::chrono::milliseconds timeout,
                                         const std::string& cluster_job = "");

// Departure barrier, the last use of `store` on a rank that finished its task: every rank counts
// itself out, and rank 0, which hosts the store, waits (up to `timeout`) until all have, so a
// rank still reading the store never finds it closed (a fast rank 0 used to leave others with
// EPIPE). Other ranks return at once. Throws CommError naming how many left when time runs out.
ZT_API void depart(Store& store, int rank, int world, std::chrono::milliseconds timeout);

// The CommContext a comm plugin needs for this rank: its place in the job, the store, a key
// prefix unique to the communicator, and the bound on every wait.
ZT_API CommContext comm_context(const RankEnv& env, Store& store, const std::string& prefix,
                                std::chrono::milliseconds timeout);

}  // namespace zt
