// Rank discovery from launcher environments.
#include <doctest/doctest.h>

#include <map>

#include "zt/error.h"
#include "zt/host/rendezvous.h"

namespace {

zt::GetEnv env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST_CASE("no launcher variables: a single process") {
  zt::RankEnv env = zt::discover_rank_env(env_of({}));
  CHECK_FALSE(env.found);
  CHECK(env.source == "none");
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

  auto slurm = zt::discover_rank_env(
      env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}}));
  CHECK(slurm.source == "slurm");
  CHECK(slurm.rank == 5);
  CHECK(slurm.world == 8);

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
}
