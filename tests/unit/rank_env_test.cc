// Rank discovery from launcher environments, and the rendezvous a Slurm or mpirun job derives
// where MASTER_ADDR/MASTER_PORT are not set.
#include <doctest/doctest.h>

#include <chrono>
#include <map>

#include "zt/error.h"
#include "zt/host/compose.h"
#include "zt/host/engine_settings.h"
#include "zt/host/rendezvous.h"
#include "zt/host/slurm_hostlist.h"

namespace {

zt::GetEnv env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

// What a Slurm step's daemon gives the processes it starts: mpirun's remote daemons (orted) run
// as such a step inside an sbatch job.
std::map<std::string, std::string> slurm_step_of_remote_daemon() {
  return {{"SLURM_PROCID", "0"},  {"SLURM_NTASKS", "1"},       {"SLURM_LOCALID", "0"},
          {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "4012345"}, {"SLURM_JOB_NODELIST", "n[1-2]"}};
}

}  // namespace

TEST_CASE("no launcher variables: a single process") {
  zt::RankEnv env = zt::discover_rank_env(env_of({}));
  CHECK_FALSE(env.found);
  CHECK(env.source == "none");
  CHECK(env.cluster_job.empty());
  CHECK(env.world == 1);
  CHECK(env.rank == 0);
}

TEST_CASE("torchrun, OpenMPI and Slurm variables are read, torchrun first") {
  auto torchrun = zt::discover_rank_env(env_of({{"RANK", "3"},
                                                {"WORLD_SIZE", "4"},
                                                {"LOCAL_RANK", "1"},
                                                {"MASTER_ADDR", "10.0.0.1"},
                                                {"MASTER_PORT", "29500"}}));
  CHECK(torchrun.source == "torchrun");
  CHECK(torchrun.rank == 3);
  CHECK(torchrun.world == 4);
  CHECK(torchrun.local_rank == 1);
  CHECK(torchrun.master_addr == "10.0.0.1");
  CHECK(torchrun.master_port == 29500);

  auto mpi = zt::discover_rank_env(env_of({{"OMPI_COMM_WORLD_RANK", "2"},
                                           {"OMPI_COMM_WORLD_SIZE", "3"},
                                           {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}));
  CHECK(mpi.source == "openmpi");
  CHECK(mpi.rank == 2);
  CHECK(mpi.world == 3);
  CHECK(mpi.local_rank == 0);
  CHECK(mpi.master_port == 0);

  auto slurm = zt::discover_rank_env(env_of({{"SLURM_PROCID", "5"},
                                             {"SLURM_NTASKS", "8"},
                                             {"SLURM_LOCALID", "1"},
                                             {"SLURM_STEP_ID", "0"}}));
  CHECK(slurm.source == "slurm");
  CHECK(slurm.rank == 5);
  CHECK(slurm.world == 8);
  // A batch script's own environment (sbatch -n 8 gives it SLURM_PROCID=0 and SLURM_NTASKS=8, as
  // a real slurmd does) is no rank of a job: `trainer --nproc` there starts zt's own launcher.
  auto batch = zt::discover_rank_env(env_of({{"SLURM_PROCID", "0"},
                                             {"SLURM_NTASKS", "8"},
                                             {"SLURM_LOCALID", "0"},
                                             {"SLURM_JOB_ID", "9"}}));
  CHECK_FALSE(batch.found);
  CHECK(batch.source == "none");
  // A step's own task count wins over SLURM_NTASKS, which can be the allocation's: srun -E keeps
  // the batch script's, and salloc's interactive step (one task) has the job's.
  auto step = zt::discover_rank_env(env_of({{"SLURM_PROCID", "1"},
                                            {"SLURM_NTASKS", "4"},
                                            {"SLURM_STEP_NUM_TASKS", "2"},
                                            {"SLURM_LOCALID", "0"},
                                            {"SLURM_STEP_ID", "0"}}));
  CHECK(step.world == 2);
  CHECK(step.rank == 1);
  auto interactive = zt::discover_rank_env(env_of({{"SLURM_PROCID", "0"},
                                                   {"SLURM_NTASKS", "4"},
                                                   {"SLURM_STEP_NUM_TASKS", "1"},
                                                   {"SLURM_LOCALID", "0"},
                                                   {"SLURM_STEP_ID", "4294967290"}}));
  CHECK(interactive.world == 1);

  auto ours = zt::discover_rank_env(
      env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"ZT_LAUNCHER", "1"}}));
  CHECK(ours.source == "zt launcher");
  CHECK(ours.rank == 1);

  auto both = zt::discover_rank_env(
      env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}}));
  CHECK(both.source == "torchrun");
  CHECK(both.world == 2);
}

TEST_CASE("malformed or inconsistent launcher variables are config errors") {
  CHECK_THROWS_AS(zt::discover_rank_env(env_of({{"RANK", "two"}, {"WORLD_SIZE", "4"}})),
                  zt::ConfigError);
  CHECK_THROWS_AS(zt::discover_rank_env(env_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}})),
                  zt::ConfigError);
  CHECK_THROWS_AS(
      zt::discover_rank_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "-1"}})),
      zt::ConfigError);
  // A port past 65535 would wrap to another (70000 -> 4464) while every message said 70000.
  CHECK_THROWS_WITH_AS(
      zt::discover_rank_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"}})),
      "environment variable MASTER_PORT='70000' is not an integer from 0 to 65535: it must be "
      "rank 0's TCP port; export the same MASTER_PORT to every rank",
      zt::ConfigError);
  CHECK(
      zt::discover_rank_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "65535"}}))
          .master_port == 65535);
  // A count past 2^24 is refused as out of range, not as "not an integer".
  CHECK_THROWS_WITH_AS(zt::discover_rank_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "99999999"}})),
                       doctest::Contains("WORLD_SIZE='99999999' is not an integer from 0 to "
                                         "16777216"),
                       zt::ConfigError);
  // Set but empty (`export WORLD_SIZE=$UNSET`): it ran as a one-rank job, every rank rank 0.
  CHECK_THROWS_WITH_AS(zt::discover_rank_env(env_of({{"RANK", "1"}, {"WORLD_SIZE", ""}})),
                       doctest::Contains("torchrun environment: WORLD_SIZE is set but empty"),
                       zt::ConfigError);
  CHECK_THROWS_AS(
      zt::discover_rank_env(env_of({{"OMPI_COMM_WORLD_RANK", ""}, {"OMPI_COMM_WORLD_SIZE", "2"}})),
      zt::ConfigError);
}

TEST_CASE("under Slurm without MASTER_ADDR/PORT the job's first host and its id's port are used") {
  const std::map<std::string, std::string> slurm = {{"SLURM_PROCID", "3"},
                                                    {"SLURM_NTASKS", "4"},
                                                    {"SLURM_LOCALID", "1"},
                                                    {"SLURM_STEP_ID", "0"},
                                                    {"SLURM_JOB_NODELIST", "gpu[07-08],login1"},
                                                    {"SLURM_JOB_ID", "4012345"}};
  const zt::RankEnv env = zt::discover_rank_env(env_of(slurm));
  CHECK(env.source == "slurm");
  CHECK(env.master_addr == "gpu07");
  CHECK(env.master_port == 17345);
  CHECK(zt::job_rendezvous_port(4012345) == 17345);
  CHECK(zt::job_rendezvous_port(70000000) == 15000);
  CHECK(env.derivation ==
        "MASTER_ADDR gpu07, the first host of SLURM_JOB_NODELIST=gpu[07-08],login1; "
        "MASTER_PORT 17345 = 15000 + SLURM_JOB_ID 4012345 % 10000");
  // The store's keys are the job step's (rendezvous() prefixes them), derived port or not.
  CHECK(env.cluster_job == "slurm-4012345.0");
  // The job's own MASTER_ADDR/PORT win, and nothing is derived for them.
  auto given = slurm;
  given["MASTER_ADDR"] = "10.1.2.3";
  given["MASTER_PORT"] = "29500";
  const zt::RankEnv set = zt::discover_rank_env(env_of(given));
  CHECK(set.master_addr == "10.1.2.3");
  CHECK(set.master_port == 29500);
  CHECK(set.derivation.empty());
  CHECK(set.cluster_job == "slurm-4012345.0");
  // torchrun's variables inside a Slurm job: torchrun's rendezvous, not the job's.
  auto torchrun = slurm;
  torchrun["RANK"] = "0";
  torchrun["WORLD_SIZE"] = "2";
  CHECK(zt::discover_rank_env(env_of(torchrun)).derivation.empty());
  CHECK(zt::discover_rank_env(env_of(torchrun)).cluster_job.empty());
  // Ranks on this node: srun's step layout at this node's index, else --ntasks-per-node's
  // SLURM_NTASKS_PER_NODE, else the job's layout.
  auto layout = slurm;
  layout["SLURM_STEP_TASKS_PER_NODE"] = "2(x3),1";
  layout["SLURM_NTASKS_PER_NODE"] = "4";  // the job's request, which a step inherits
  for (const auto& [node, tasks] : std::map<std::string, int>{{"0", 2}, {"2", 2}, {"3", 1}}) {
    layout["SLURM_NODEID"] = node;
    CHECK(zt::discover_rank_env(env_of(layout)).local_world == tasks);
  }
  layout["SLURM_NODEID"] = "4";  // past the step's layout: the job's request
  CHECK(zt::discover_rank_env(env_of(layout)).local_world == 4);
  layout.erase("SLURM_NTASKS_PER_NODE");
  layout["SLURM_TASKS_PER_NODE"] = "3(x5)";
  CHECK(zt::discover_rank_env(env_of(layout)).local_world == 3);
  layout.erase("SLURM_TASKS_PER_NODE");
  CHECK(zt::discover_rank_env(env_of(layout)).local_world == 0);  // not known
  // A second step running at once (srun ... & srun ... &) meets at its own first node and port;
  // step 0 keeps the job's port.
  auto step = slurm;
  step["SLURM_STEP_ID"] = "1";
  step["SLURM_STEP_NODELIST"] = "gpu08";
  const zt::RankEnv second = zt::discover_rank_env(env_of(step));
  CHECK(second.master_addr == "gpu08");
  CHECK(second.master_port == zt::job_rendezvous_port(4012345 + 997));
  CHECK(second.master_port != env.master_port);
  CHECK(second.cluster_job == "slurm-4012345.1");
  CHECK(second.derivation ==
        "MASTER_ADDR gpu08, the first host of SLURM_STEP_NODELIST=gpu08; MASTER_PORT 18342 = "
        "15000 + (SLURM_JOB_ID 4012345 + 997 x SLURM_STEP_ID 1) % 10000");
  // Rank 0 away from the step's first node: refused, with the way out.
  auto away = slurm;
  away["SLURM_PROCID"] = "0";
  away["SLURMD_NODENAME"] = "gpu08";
  CHECK_THROWS_WITH_AS(zt::discover_rank_env(env_of(away)),
                       doctest::Contains("but rank 0 runs on gpu08"), zt::ConfigError);
  away["SLURMD_NODENAME"] = "gpu07";
  CHECK(zt::discover_rank_env(env_of(away)).master_addr == "gpu07");
  // A malformed list or job id is an error that names the variable.
  auto bad = slurm;
  bad["SLURM_JOB_NODELIST"] = "gpu[07-";
  CHECK_THROWS_WITH_AS(zt::discover_rank_env(env_of(bad)),
                       doctest::Contains("SLURM_JOB_NODELIST='gpu[07-' is not a Slurm hostlist"),
                       zt::ConfigError);
  bad = slurm;
  bad["SLURM_JOB_ID"] = "12x";
  CHECK_THROWS_WITH_AS(zt::discover_rank_env(env_of(bad)),
                       doctest::Contains("SLURM_JOB_ID='12x' is not a Slurm id"), zt::ConfigError);
}

TEST_CASE("under mpirun without MASTER_ADDR/PORT, mpirun's host and a port from its job are used") {
  const std::map<std::string, std::string> mpi = {
      {"OMPI_COMM_WORLD_RANK", "0"},
      {"OMPI_COMM_WORLD_SIZE", "4"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
      {"OMPI_MCA_orte_hnp_uri", "1664221184.0;tcp://10.231.0.1,172.17.0.2:41801"},
      {"OMPI_MCA_orte_local_daemon_uri", "1664221184.0;tcp://10.231.0.1,172.17.0.2:41801"}};
  const zt::RankEnv env = zt::discover_rank_env(env_of(mpi));
  CHECK(env.source == "openmpi");
  CHECK(env.local_world == 2);
  CHECK(env.master_addr == "10.231.0.1");
  // The job id is the family (0x6332) << 16: its own last digits would give every mpirun one of
  // 625 ports.
  CHECK(env.master_port == 20394);
  CHECK(env.derivation ==
        "MASTER_ADDR 10.231.0.1, mpirun's host (the first address of OMPI_MCA_orte_hnp_uri); "
        "MASTER_PORT 20394 = 15000 + Open MPI job family 25394 (job 1664221184 >> 16) % 10000");
  CHECK(env.cluster_job == "ompi-1664221184.0");
  // mpirun inside an sbatch job: ranks on other nodes are started by a Slurm step's daemon and
  // see its variables, but mpirun gave them their place, so they take its job, as rank 0 does.
  auto in_batch = mpi;
  in_batch["OMPI_COMM_WORLD_RANK"] = "2";
  in_batch["OMPI_MCA_orte_local_daemon_uri"] = "1664221184.1;tcp://10.231.0.2:41409";
  for (const auto& [name, value] : slurm_step_of_remote_daemon()) in_batch[name] = value;
  CHECK(zt::discover_rank_env(env_of(in_batch)).source == "openmpi");
  CHECK(zt::discover_rank_env(env_of(in_batch)).cluster_job == "ompi-1664221184.0");
  // Another rank, on the second host: its daemon is not mpirun, and it cannot tell where rank 0
  // is; it takes mpirun's host too.
  auto other = mpi;
  other["OMPI_COMM_WORLD_RANK"] = "2";
  other["OMPI_MCA_orte_local_daemon_uri"] = "1664221184.1;tcp://10.231.0.2:41409";
  CHECK(zt::discover_rank_env(env_of(other)).master_addr == "10.231.0.1");
  // Rank 0 away from mpirun: refused, with the way out.
  auto away = other;
  away["OMPI_COMM_WORLD_RANK"] = "0";
  CHECK_THROWS_WITH_AS(zt::discover_rank_env(env_of(away)),
                       doctest::Contains("rank 0 runs on another host"), zt::ConfigError);
  // MASTER_ADDR and MASTER_PORT given: nothing derived, nothing checked.
  away["MASTER_ADDR"] = "10.231.0.2";
  away["MASTER_PORT"] = "29500";
  CHECK(zt::discover_rank_env(env_of(away)).derivation.empty());
  CHECK(zt::discover_rank_env(env_of(away)).cluster_job == "ompi-1664221184.0");
  auto bad = mpi;
  bad["OMPI_MCA_orte_hnp_uri"] = "garbage";
  CHECK_THROWS_WITH_AS(zt::discover_rank_env(env_of(bad)),
                       doctest::Contains("OMPI_MCA_orte_hnp_uri='garbage'"), zt::ConfigError);
}

TEST_CASE("an MPI launcher zt does not read (MPICH's, Intel MPI's Hydra) is refused, with what to "
          "export") {
  // mpiexec -n 4 outside Slurm: every process took itself for a job of one.
  CHECK_THROWS_WITH_AS(zt::discover_rank_env(env_of({{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}})),
                       doctest::Contains("PMI_SIZE=4 and PMI_RANK=1: an MPI launcher zt does "
                                         "not read started this process"),
                       zt::ConfigError);
  // Inside a Slurm step of 2 nodes, Hydra's proxies are srun's tasks: the ranks see the node's
  // SLURM_PROCID and the node count.
  std::map<std::string, std::string> hydra = {{"SLURM_PROCID", "1"},
                                              {"SLURM_NTASKS", "2"},
                                              {"SLURM_STEP_NUM_TASKS", "2"},
                                              {"SLURM_LOCALID", "0"},
                                              {"SLURM_STEP_ID", "0"},
                                              {"SLURM_JOB_ID", "77"},
                                              {"SLURM_STEP_NODELIST", "n[1-2]"},
                                              {"PMI_RANK", "3"},
                                              {"PMI_SIZE", "4"},
                                              {"MPI_LOCALRANKID", "1"}};
  CHECK_THROWS_WITH_AS(zt::discover_rank_env(env_of(hydra)),
                       doctest::Contains("inside a Slurm step whose 2 task(s) are its proxies"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(zt::discover_rank_env(env_of(hydra)),
                       doctest::Contains("export RANK, WORLD_SIZE, LOCAL_RANK"), zt::ConfigError);
  // srun's own PMI (srun --mpi=pmi2) counts the step's tasks: read as Slurm's.
  auto pmi2 = hydra;
  pmi2["PMI_SIZE"] = "2";
  pmi2["PMI_RANK"] = "1";
  CHECK(zt::discover_rank_env(env_of(pmi2)).source == "slurm");
  // The way out taken: torchrun's variables exported from PMI's.
  CHECK(zt::discover_rank_env(
            env_of({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"PMI_RANK", "3"}, {"PMI_SIZE", "4"}}))
            .rank == 3);
  // A job of one: nothing to refuse.
  CHECK(zt::discover_rank_env(env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}})).world == 1);
}

TEST_CASE("a loopback rendezvous for ranks on several hosts is refused before anyone waits") {
  std::map<std::string, std::string> slurm = {
      {"SLURM_PROCID", "2"},         {"SLURM_NTASKS", "4"},
      {"SLURM_LOCALID", "0"},        {"SLURM_STEP_ID", "0"},
      {"SLURM_JOB_ID", "78"},        {"SLURM_STEP_NODELIST", "n[1-2]"},
      {"SLURM_STEP_NUM_NODES", "2"}, {"MASTER_ADDR", "localhost"},
      {"MASTER_PORT", "29500"}};
  zt::RankEnv env = zt::discover_rank_env(env_of(slurm));
  CHECK(env.several_hosts);
  zt::LaunchSettings launch;
  launch.master_addr = "127.0.0.1";
  launch.timeout = std::chrono::seconds(2);
  CHECK_THROWS_WITH_AS(zt::join_job_store(launch, env),
                       doctest::Contains("MASTER_ADDR=localhost is this host's loopback, which the "
                                         "slurm job's ranks on other hosts cannot reach; unset "
                                         "MASTER_ADDR in the job script"),
                       zt::ConfigError);
  // One node: loopback reaches every rank, so it is not judged.
  slurm["SLURM_STEP_NUM_NODES"] = "1";
  CHECK_FALSE(zt::discover_rank_env(env_of(slurm)).several_hosts);
  // mpirun's ranks 2 of 4 on this host, the config's loopback address taken (Open MPI 5 gives
  // no mpirun address: only MASTER_PORT was exported).
  const std::map<std::string, std::string> ompi5 = {{"OMPI_COMM_WORLD_RANK", "1"},
                                                    {"OMPI_COMM_WORLD_SIZE", "4"},
                                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                                    {"MASTER_PORT", "29500"}};
  env = zt::discover_rank_env(env_of(ompi5));
  CHECK(env.several_hosts);
  CHECK_THROWS_WITH_AS(zt::join_job_store(launch, env),
                       doctest::Contains("launch.master_addr = \"127.0.0.1\" (no MASTER_ADDR is "
                                         "set) is this host's loopback"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(zt::join_job_store(launch, env),
                       doctest::Contains("Open MPI 5's mpirun gives no address"), zt::ConfigError);
  // Without MASTER_PORT either, the missing port says the same.
  auto no_port = ompi5;
  no_port.erase("MASTER_PORT");
  CHECK_THROWS_WITH_AS(zt::join_job_store(launch, zt::discover_rank_env(env_of(no_port))),
                       doctest::Contains("no MASTER_PORT and launch.master_port = 0; set "
                                         "MASTER_PORT (and MASTER_ADDR) for every rank (Open MPI "
                                         "5's mpirun gives no address"),
                       zt::ConfigError);
}
