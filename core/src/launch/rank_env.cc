#include <algorithm>
#include <cstdlib>
#include <string>

#include "zt/error.h"
#include "zt/host/rendezvous.h"
#include "zt/host/slurm_hostlist.h"

namespace zt {

namespace {

// The value of `name` as an integer from 0 to `max`; `fallback` when it is unset or empty.
// `what` says what the value must be and how to fix it, for the error.
int parse_int(const GetEnv& getenv, const char* name, int fallback, long max = 1 << 24,
              const char* what = "a rank count or number; fix the launcher's environment") {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > max) {
    throw ConfigError(std::string("environment variable ") + name + "='" + v +
                      "' is not an integer from 0 to " + std::to_string(max) + ": it must be " +
                      what);
  }
  return static_cast<int>(n);
}

// A non-negative integer from Slurm's environment; -1 when unset.
long long slurm_id(const GetEnv& getenv, const char* name) {
  const char* v = getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long long id = std::strtoll(v, &end, 10);
  if (*end != '\0' || id < 0) {
    throw ConfigError(std::string("environment variable ") + name + "='" + v +
                      "' is not a Slurm id; set MASTER_ADDR and MASTER_PORT for every rank "
                      "instead");
  }
  return id;
}

// Ranks that srun started, with no MASTER_ADDR/MASTER_PORT: rank 0 runs on the step's first host
// (srun's default block distribution puts task 0 there), and every rank derives the same port
// from the job and step ids, so a job script needs neither variable. Two steps of one job that run
// at once (srun ... & srun ... &) meet apart: each at its own first host and port.
void from_slurm_job(const GetEnv& getenv, RankEnv& env) {
  const char* list_name = "SLURM_STEP_NODELIST";
  const char* nodes = getenv(list_name);
  if (!nodes || !*nodes) {
    list_name = "SLURM_JOB_NODELIST";
    nodes = getenv(list_name);
  }
  if (env.master_addr.empty() && nodes && *nodes) {
    env.master_addr = expand_slurm_hostlist(nodes, list_name).front();
    env.derivation = "MASTER_ADDR " + env.master_addr + ", the first host of " + list_name + "=" +
                     nodes;
    // Slurm names nodes as slurm.conf does (SLURMD_NODENAME); only rank 0 can see where it runs.
    const char* here = getenv("SLURMD_NODENAME");
    if (env.rank == 0 && here && *here && env.master_addr != here) {
      throw ConfigError("under srun without MASTER_ADDR, zt meets at the step's first node (" +
                        env.master_addr + "), but rank 0 runs on " + here +
                        " (a --distribution or --relative that moves task 0); export "
                        "MASTER_ADDR (rank 0's host) and MASTER_PORT in the job script");
    }
  }
  const long long job = slurm_id(getenv, "SLURM_JOB_ID");
  const long long step = std::max(0LL, slurm_id(getenv, "SLURM_STEP_ID"));
  env.cluster_job = "slurm-" + std::to_string(std::max(0LL, job)) + "." + std::to_string(step);
  if (env.master_port == 0 && job >= 0) {
    // 997 and 10000 share no factor: the steps of one job get distinct ports, and step 0 keeps
    // the job's own.
    env.master_port = job_rendezvous_port(job + 997 * step);
    env.derivation += std::string(env.derivation.empty() ? "" : "; ") + "MASTER_PORT " +
                      std::to_string(env.master_port) + " = 15000 + " +
                      (step == 0 ? "SLURM_JOB_ID " + std::to_string(job)
                                 : "(SLURM_JOB_ID " + std::to_string(job) +
                                       " + 997 x SLURM_STEP_ID " + std::to_string(step) + ")") +
                      " % 10000";
  }
}

// Ranks that mpirun (Open MPI) started, with no MASTER_ADDR/MASTER_PORT: Open MPI gives every
// rank the address of mpirun itself (its "HNP", OMPI_MCA_orte_hnp_uri =
// "JOB.0;tcp://ADDR[,ADDR...]:PORT") and of its own node's daemon
// (OMPI_MCA_orte_local_daemon_uri), and mpirun's default mapping puts rank 0 on the first host,
// where mpirun runs when started there. So rank 0's host is mpirun's first address, and the port
// comes from the job number. Rank 0 checks it runs beside mpirun (its daemon is mpirun's), since
// the other ranks cannot.
void from_openmpi_job(const GetEnv& getenv, RankEnv& env) {
  const char* hnp = getenv("OMPI_MCA_orte_hnp_uri");
  if (!hnp || !*hnp) return;
  const std::string uri = hnp;
  env.cluster_job = "ompi-" + uri.substr(0, uri.find(';'));
  if (!env.master_addr.empty() && env.master_port > 0) return;
  const size_t dot = uri.find('.'), scheme = uri.find("://");
  const size_t colon = uri.rfind(':');
  const size_t end = uri.find_first_of(",:", scheme == std::string::npos ? 0 : scheme + 3);
  if (dot == std::string::npos || scheme == std::string::npos || colon <= scheme + 3 ||
      end == std::string::npos) {
    throw ConfigError("environment variable OMPI_MCA_orte_hnp_uri='" + uri +
                      "' is not Open MPI's \"JOB.0;tcp://ADDR:PORT\"; set MASTER_ADDR and "
                      "MASTER_PORT for every rank instead");
  }
  if (env.master_addr.empty()) {
    env.master_addr = uri.substr(scheme + 3, end - scheme - 3);
    env.derivation = "MASTER_ADDR " + env.master_addr +
                     ", mpirun's host (the first address of OMPI_MCA_orte_hnp_uri)";
    const char* daemon = getenv("OMPI_MCA_orte_local_daemon_uri");
    if (env.rank == 0 && daemon && uri != daemon) {
      throw ConfigError(
          "under mpirun without MASTER_ADDR, zt meets at mpirun's host (" + env.master_addr +
          "), but rank 0 runs on another host (its daemon is " + daemon +
          "); list mpirun's host first (-H, --hostfile), or export MASTER_ADDR (rank 0's "
          "host) and MASTER_PORT with mpirun -x");
    }
  }
  if (env.master_port == 0) {
    // ORTE's job id is its job family (a 16-bit hash of mpirun's node and pid) shifted up by
    // 16 bits: its low bits are the same for every mpirun, so the family gives the port.
    const long long job = std::strtoll(uri.c_str(), nullptr, 10);
    env.master_port = job_rendezvous_port(job >> 16);
    env.derivation += std::string(env.derivation.empty() ? "" : "; ") + "MASTER_PORT " +
                      std::to_string(env.master_port) + " = 15000 + Open MPI job family " +
                      std::to_string(job >> 16) + " (job " + std::to_string(job) +
                      " >> 16) % 10000";
  }
}

// The tasks on this node of a layout such as SLURM_STEP_TASKS_PER_NODE, "2(x3),1" (two tasks on
// each of the first three nodes, one on the fourth), at this node's index SLURM_NODEID; 0 when
// either is missing or unreadable.
int slurm_tasks_on_node(const GetEnv& getenv, const char* layout_name) {
  const char* layout = getenv(layout_name);
  const char* node = getenv("SLURM_NODEID");
  if (!layout || !node || !*node) return 0;
  long index = std::strtol(node, nullptr, 10);
  const char* p = layout;
  while (*p) {
    char* end = nullptr;
    const long tasks = std::strtol(p, &end, 10);
    if (end == p || tasks < 1) return 0;
    long repeat = 1;
    if (end[0] == '(' && end[1] == 'x') {
      repeat = std::strtol(end + 2, &end, 10);
      if (*end != ')' || repeat < 1) return 0;
      ++end;
    }
    if (index < repeat) return static_cast<int>(tasks);
    index -= repeat;
    if (*end != ',') return 0;
    p = end + 1;
  }
  return 0;
}

// MPICH's and Intel MPI's mpiexec (Hydra) and Cray's launcher give their ranks PMI_RANK and
// PMI_SIZE, which zt does not read: outside Slurm every process took itself for a job of one;
// inside a Slurm step, Hydra's per-node proxies are srun's tasks, so every process read its
// node's SLURM_PROCID and the node count, and ranks met twice under one number. Refused with what
// to export instead; a step of srun's own PMI (srun --mpi=pmi2) has PMI_SIZE equal to its tasks.
void refuse_unread_mpi_launcher(const GetEnv& getenv, const RankEnv& env) {
  const char* size = getenv("PMI_SIZE");
  const long pmi_size = size ? std::strtol(size, nullptr, 10) : 0;
  if (pmi_size <= 1) return;
  std::string where;
  if (env.source == "slurm" && pmi_size != env.world) {
    where = ", inside a Slurm step whose " + std::to_string(env.world) +
            " task(s) are its proxies, one a node, not the ranks";
  } else if (env.source != "none") {
    return;
  }
  const char* rank = getenv("PMI_RANK");
  throw ConfigError(
      std::string("PMI_SIZE=") + size + (rank ? std::string(" and PMI_RANK=") + rank : "") +
      ": an MPI launcher zt does not read started this process (MPICH's or Intel "
      "MPI's mpiexec, Cray's)" +
      where +
      "; zt takes its ranks from srun, Open MPI's mpirun and torchrun's variables: "
      "start the ranks with one of them, or export RANK, WORLD_SIZE, LOCAL_RANK, "
      "LOCAL_WORLD_SIZE (from PMI_RANK, PMI_SIZE and Hydra's MPI_LOCALRANKID, "
      "MPI_LOCALNRANKS or Cray's PMI_LOCAL_RANK, PMI_LOCAL_SIZE), MASTER_ADDR and MASTER_PORT "
      "for each rank (docs/cluster.md)");
}

}  // namespace

RankEnv discover_rank_env(const GetEnv& getenv) {
  struct Scheme {
    const char* source;
    const char* rank;
    const char* world;
    const char* local;
    const char* local_world;
  };
  static const Scheme schemes[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      // The local world comes from srun's layout below.
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
  };
  RankEnv env;
  env.source = "none";
  for (const auto& s : schemes) {
    if (!getenv(s.rank) || !getenv(s.world)) continue;
    // A batch script has SLURM_PROCID and SLURM_NTASKS too (the job's), but it is no rank: only
    // a task srun started (a job step, SLURM_STEP_ID) is. In the batch script zt's own launcher
    // starts the ranks (trainer --nproc).
    if (s.source == std::string("slurm") && !getenv("SLURM_STEP_ID")) continue;
    env.found = true;
    env.source = s.source;
    if (env.source == std::string("torchrun") && getenv("ZT_LAUNCHER")) env.source = "zt launcher";
    // A step's own task count first: SLURM_NTASKS can be the allocation's (`srun -E -n 2` in an
    // `sbatch -n 4`, salloc's interactive step), and rank 0 waited for ranks never started.
    const char* world = s.world;
    const char* step_tasks = getenv("SLURM_STEP_NUM_TASKS");
    if (env.source == std::string("slurm") && step_tasks && *step_tasks != '\0') {
      world = "SLURM_STEP_NUM_TASKS";
    }
    // Set but empty (`export WORLD_SIZE=$UNSET`) is no value: taken for the defaults, every
    // process ran as rank 0 of a one-rank job.
    for (const char* name : {s.rank, world}) {
      if (*getenv(name) != '\0') continue;
      throw ConfigError(std::string(s.source) + " environment: " + name +
                        " is set but empty; give it the rank count or rank the launcher meant, "
                        "or unset it");
    }
    env.rank = parse_int(getenv, s.rank, 0);
    env.world = parse_int(getenv, world, 1);
    env.local_rank = parse_int(getenv, s.local, env.rank);
    env.local_world = s.local_world ? parse_int(getenv, s.local_world, 0) : 0;
    if (env.world < 1 || env.rank >= env.world) {
      throw ConfigError(std::string(s.source) + " environment: " + s.rank + "=" +
                        std::to_string(env.rank) + " is not below " + world + "=" +
                        std::to_string(env.world) + "; fix the launcher's environment");
    }
    break;
  }
  if (const char* addr = getenv("MASTER_ADDR")) env.master_addr = addr;
  // 0 as unset: a port is derived (Slurm, Open MPI) or chosen by the launcher.
  env.master_port = parse_int(getenv, "MASTER_PORT", 0, 65535,
                              "rank 0's TCP port; export the same MASTER_PORT to every rank");
  if (env.source == std::string("slurm")) {
    from_slurm_job(getenv, env);
    // This step's own layout first: the job's --ntasks-per-node (SLURM_NTASKS_PER_NODE, which a
    // step inherits) is not what an `srun -N2 -n2` inside it runs.
    env.local_world = slurm_tasks_on_node(getenv, "SLURM_STEP_TASKS_PER_NODE");
    if (env.local_world == 0) {
      env.local_world = parse_int(getenv, "SLURM_NTASKS_PER_NODE", 0);
    }
    if (env.local_world == 0) env.local_world = slurm_tasks_on_node(getenv, "SLURM_TASKS_PER_NODE");
    const char* nodes = getenv("SLURM_STEP_NUM_NODES");
    if (!nodes || !*nodes) nodes = getenv("SLURM_JOB_NUM_NODES");
    env.several_hosts = nodes && std::strtol(nodes, nullptr, 10) > 1;
  }
  if (env.source == std::string("openmpi")) {
    from_openmpi_job(getenv, env);
    env.several_hosts = env.local_world > 0 && env.local_world < env.world;
  }
  refuse_unread_mpi_launcher(getenv, env);
  return env;
}

CommContext comm_context(const RankEnv& env, Store& store, const std::string& prefix,
                         std::chrono::milliseconds timeout) {
  CommContext ctx;
  ctx.rank = env.rank;
  ctx.world = env.world;
  ctx.local_rank = env.local_rank;
  ctx.store = &store;
  ctx.store_prefix = prefix;
  ctx.timeout = timeout;
  return ctx;
}

RankEnv discover_rank_env() {
  return discover_rank_env([](const char* name) { return std::getenv(name); });
}

}  // namespace zt
