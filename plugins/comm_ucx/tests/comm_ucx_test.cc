// comm_ucx's own paths and options, exercised across real ranks. tests/multiproc runs the
// op/dtype/length matrix over the default path (same-host shared memory); here the tag-matched
// ring (used across hosts) gets the same matrix with tiny pipeline chunks, the shared-memory
// window gets a tiny capacity (many rounds), and failures are checked on both paths.
#include <doctest/doctest.h>

#include "../../../tests/test_util.h"
#include "zt/launcher.h"

using zt::test::contains;
using zt::test::read_file;
using zt::test::TempDir;

namespace {

struct Run {
  zt::LaunchResult result;
  std::string reports;
};

Run run_ranks(int nproc, std::vector<std::string> args, bool stop_all = true) {
  TempDir out;
  zt::LaunchSpec spec;
  spec.nproc = nproc;
  spec.argv = {ZT_TEST_COMM_CHECK};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = {{"ZT_CHECK_OUT", out.path().string()}};
  spec.stop_all_on_failure = stop_all;
  spec.timeout = std::chrono::minutes(4);
  Run run;
  run.result = zt::launch_local(spec);
  for (int r = 0; r < nproc; ++r) {
    run.reports += "rank " + std::to_string(r) + ": " + read_file(out.file("rank" + std::to_string(r) + ".txt"));
  }
  return run;
}

}  // namespace

TEST_CASE("ring path, 4 KiB chunks: every collective exact with thousands of chunks pipelined") {
  Run run = run_ranks(3, {"--scenario", "collectives", "--option", "shared_memory=false,chunk_kb=4"});
  INFO(run.result.message << "\n" << run.reports);
  CHECK(run.result.exit_code == 0);
  CHECK(contains(run.reports, "rank 2: OK"));
}

TEST_CASE("ring path, 4 ranks, default chunks") {
  Run run = run_ranks(4, {"--scenario", "collectives", "--option", "shared_memory=false"});
  INFO(run.result.message << "\n" << run.reports);
  CHECK(run.result.exit_code == 0);
}

TEST_CASE("shared-memory path with a 64 KiB window: results exact over many rounds") {
  Run run = run_ranks(3, {"--scenario", "collectives", "--option", "shm_chunk_kb=64"});
  INFO(run.result.message << "\n" << run.reports);
  CHECK(run.result.exit_code == 0);
  CHECK(contains(run.reports, "rank 2: OK"));
}

TEST_CASE("ring path: a dead peer makes the survivor fail naming it, within the timeout") {
  Run run = run_ranks(2, {"--scenario", "die", "--victim", "1", "--timeout-ms", "2000",
                          "--option", "shared_memory=false"}, /*stop_all=*/false);
  INFO(run.result.message << "\n" << run.reports);
  CHECK(run.result.rank_codes[0] == 4);
  CHECK(contains(run.reports, "waiting for rank 1"));
}

TEST_CASE("peer_error_handling = true: a dead peer is reported as unreachable or silent") {
  Run run = run_ranks(2, {"--scenario", "die", "--victim", "1", "--timeout-ms", "3000",
                          "--option", "shared_memory=false,peer_error_handling=true"}, /*stop_all=*/false);
  INFO(run.result.message << "\n" << run.reports);
  CHECK(run.result.rank_codes[0] == 4);
  CHECK(contains(run.reports, "rank 1"));
}

TEST_CASE("a transport list UCX refuses is a config error naming the option") {
  Run run = run_ranks(1, {"--scenario", "collectives", "--option", "tls=no_such_transport"});
  INFO(run.reports);
  CHECK(run.result.exit_code != 0);
  CHECK(contains(run.reports, "plugin.comm_ucx.tls"));
}
