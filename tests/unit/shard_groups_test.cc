// shard_groups (zt/host/compose.h): zero.mics_shard_size (or shard_group_size) resolved against a
// job's world and ranks per host, with the key's file:line in every refusal.
#include <doctest/doctest.h>

#include "zt/error.h"
#include "zt/host/compose.h"
#include "zt/host/config.h"

namespace {

zt::EngineSettings job(const std::string& zero) {
  return zt::EngineSettings::of(
      zt::Config::load_string("[run]\ntask = \"smoke\"\n[zero]\nstage = 3\n" + zero, "job.toml"));
}

zt::ShardGroupChoice shard_group_choice(const zt::EngineSettings& s, int world, int per_host) {
  return zt::shard_groups(s, world, per_host);
}

std::string refusal(const zt::EngineSettings& s, int world, int per_host) {
  try {
    zt::shard_groups(s, world, per_host);
  } catch (const zt::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("shard_groups: a size, the ranks of one host, flat, and the other name") {
  CHECK(shard_group_choice(job(""), 8, 4).size == 0);  // default -1: flat
  CHECK(shard_group_choice(job("mics_shard_size = 2\n"), 8, 4).size == 2);
  CHECK(shard_group_choice(job("mics_shard_size = 0\n"), 8, 4).size == 4);
  CHECK(shard_group_choice(job("shard_group_size = 4\n"), 8, 0).size == 4);
  // A group of the whole world is flat ZeRO: nothing to split.
  CHECK(shard_group_choice(job("mics_shard_size = 8\n"), 8, 4).size == 0);
  CHECK(shard_group_choice(job("mics_shard_size = 8\n"), 8, 4).sharding_world(8) == 8);
  CHECK(shard_group_choice(job("mics_shard_size = 2\n"), 8, 4).sharding_world(8) == 2);
  const auto hier = shard_group_choice(
      job("mics_shard_size = 4\nmics_hierarchical_params_gather = true\n"), 8, 2);
  CHECK(hier.hierarchical);
  CHECK(hier.ranks_per_host == 2);
}

TEST_CASE("shard_groups: sizes that do not divide the world, or an unknown host size") {
  const std::string three = refusal(job("mics_shard_size = 3\n"), 8, 4);
  CHECK(three.find("job.toml:5") != std::string::npos);
  CHECK(three.find("zero.mics_shard_size = 3 does not divide the job's 8 ranks") !=
        std::string::npos);
  CHECK(refusal(job("mics_shard_size = 16\n"), 8, 4).find("does not divide") != std::string::npos);
  const std::string host = refusal(job("mics_shard_size = 0\n"), 8, 0);
  CHECK(host.find("LOCAL_WORLD_SIZE") != std::string::npos);
  const std::string odd_host = refusal(job("shard_group_size = 0\n"), 8, 3);
  CHECK(odd_host.find("zero.shard_group_size = 0 (3 ranks per host) does not divide") !=
        std::string::npos);
}
