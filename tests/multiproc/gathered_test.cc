// Engine::with_gathered_parameters (DeepSpeed's GatheredParameters) and model.init_from through
// the engine, across processes: ranks of zt_gathered_check (see its header) over world sizes 1-3,
// stages 0-3, fp32 and bf16, both strategies, masters in memory, in a host tier and streamed from
// files, with tiles spanning several parameters and parameters spanning several tiles.
#include <doctest/doctest.h>

#include "comm_check_launch.h"

namespace {

zt::test::RankReports run_gathered(int world, std::vector<std::string> args) {
  zt::test::TempDir out;
  zt::LaunchSpec spec;
  spec.nproc = world;
  spec.argv = {ZT_TEST_GATHERED_CHECK};
  spec.fork_ranks = true;
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = {{"ZT_CHECK_OUT", out.path().string()}};
  spec.timeout = std::chrono::minutes(2);
  zt::test::RankReports r;
  r.result = zt::launch_local(spec);
  for (int i = 0; i < world; ++i)
    r.reports.push_back(zt::test::read_file(out.file("rank" + std::to_string(i) + ".txt")));
  return r;
}

void expect_ok(int world, const std::vector<std::string>& args) {
  const zt::test::RankReports r = run_gathered(world, args);
  std::string line;
  for (const auto& a : args) line += a + " ";
  INFO("world " << world << ": " << line << "\n" << r.all());
  CHECK(r.result.exit_code == 0);
  for (const auto& rep : r.reports) CHECK(rep.rfind("OK", 0) == 0);
}

}  // namespace

TEST_CASE("gathered parameters: read, refuse, edit on one rank, train on: stages 0-2") {
  expect_ok(1, {"--stage", "0", "--shard", "shard_bucket"});
  expect_ok(2, {"--stage", "1", "--shard", "shard_tensor", "--dtype", "bf16"});
  // Masters streamed from files in tiles of 1024 elements (sub_group 1 rounds up to one).
  expect_ok(3, {"--stage", "2", "--shard", "shard_bucket", "--offload_optimizer", "offload_nvme",
                "--sub_group", "1"});
}

TEST_CASE("gathered parameters: stage 3 shards, persistent groups and every offload placement") {
  // fp32 without offload: the parameter shard is the master itself; the small tensors stay
  // gathered (persistent), so their flat buffers are rewritten too.
  expect_ok(2, {"--stage", "3", "--shard", "shard_tensor", "--persist", "100"});
  // Both roles streamed from files, bf16 parameter tiles written from the master tiles.
  expect_ok(3, {"--stage", "3", "--shard", "shard_bucket", "--dtype", "bf16", "--offload_optimizer",
                "offload_nvme", "--offload_param", "offload_nvme", "--sub_group", "1"});
  // Masters in memory, parameter shards streamed from files; then both in a host tier.
  expect_ok(2, {"--stage", "3", "--shard", "shard_bucket", "--offload_param", "offload_nvme",
                "--sub_group", "1"});
  expect_ok(2, {"--stage", "3", "--shard", "shard_tensor", "--dtype", "bf16", "--offload_optimizer",
                "offload_cpu", "--offload_param", "offload_cpu", "--persist", "100"});
}

TEST_CASE("model.init_from through the engine: refusals as the Model loader's, values exact") {
  expect_ok(1, {"--mode", "init_from", "--stage", "0", "--shard", "shard_tensor"});
  expect_ok(3, {"--mode", "init_from", "--stage", "3", "--shard", "shard_bucket", "--dtype", "bf16",
                "--offload_optimizer", "offload_nvme", "--offload_param", "offload_nvme",
                "--sub_group", "1"});
}
