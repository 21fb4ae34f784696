// comm_ucx's own options, exercised across real ranks: tiny pipeline chunks (thousands of
// chunks in flight, ring steps overlapping), UCX peer failure detection, a transport list UCX
// refuses. The op/dtype/length matrix for every comm plugin is in tests/multiproc.
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

TEST_CASE("4 KiB chunks: every collective stays exact with thousands of chunks pipelined") {
  Run run = run_ranks(3, {"--scenario", "collectives", "--option", "chunk_kb=4"});
  INFO(run.result.message << "\n" << run.reports);
  CHECK(run.result.exit_code == 0);
  CHECK(contains(run.reports, "rank 2: OK"));
}

TEST_CASE("peer_error_handling = true: a dead peer is reported as unreachable or silent") {
  Run run = run_ranks(2, {"--scenario", "die", "--victim", "1", "--timeout-ms", "3000",
                          "--option", "peer_error_handling=true"}, /*stop_all=*/false);
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
