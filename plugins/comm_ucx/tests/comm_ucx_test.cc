// comm_ucx's own paths and options, exercised across real ranks. tests/multiproc runs the
// op/dtype/length matrix over the default path (same-host shared memory); here the tag-matched
// ring (used across hosts) gets the same matrix with tiny pipeline chunks, the shared-memory
// window gets a tiny capacity (many rounds), and failures are checked on both paths.
#include <doctest/doctest.h>

#include "../../../tests/multiproc/comm_check_launch.h"

using zt::test::contains;

using zt::test::launch_comm_check;

TEST_CASE("ring path, 4 KiB chunks: every collective exact with thousands of chunks pipelined") {
  auto run = launch_comm_check(
      3, {"--scenario", "collectives", "--option", "shared_memory=false,chunk_kb=4"});
  INFO(run.all());
  CHECK(run.result.exit_code == 0);
  // The options reached the communicator: the ring, in 4 KiB chunks.
  CHECK(contains(run.all(), "rank 2: OK: comm_ucx: pipelined ring over UCX tagged messages (4 KiB "
                            "chunks)"));
}

TEST_CASE("ring path, 4 ranks, default chunks") {
  auto run = launch_comm_check(4, {"--scenario", "collectives", "--option", "shared_memory=false"});
  INFO(run.all());
  CHECK(run.result.exit_code == 0);
  for (int r = 0; r < 4; ++r) {
    CHECK(contains(run.reports[r], "OK: comm_ucx: pipelined ring over UCX tagged messages ("));
  }
}

TEST_CASE("ring path: split sub-communicators reuse the endpoints, exact at worlds 3 and 4") {
  for (int world : {3, 4}) {
    CAPTURE(world);
    auto run = launch_comm_check(
        world, {"--scenario", "split", "--option", "shared_memory=false,chunk_kb=16"});
    INFO(run.all());
    CHECK(run.result.exit_code == 0);
    CHECK(contains(run.all(), "rank " + std::to_string(world - 1) +
                                  ": OK: comm_ucx: pipelined ring over UCX tagged messages (16 "
                                  "KiB chunks)"));
  }
}

TEST_CASE("shared-memory path with a 64 KiB window: results exact over many rounds") {
  auto run = launch_comm_check(3, {"--scenario", "collectives", "--option", "shm_chunk_kb=64"});
  INFO(run.all());
  CHECK(run.result.exit_code == 0);
  CHECK(contains(run.all(), "rank 2: OK: comm_ucx: UCX-mapped shared memory between the 3 ranks "
                            "of this host (64 KiB window per rank)"));
}

TEST_CASE("ring path: a dead peer makes the survivor fail naming it, within the timeout") {
  auto run = launch_comm_check(2,
                               {"--scenario", "die", "--victim", "1", "--timeout-ms", "2000",
                                "--option", "shared_memory=false"},
                               /*stop_all=*/false);
  INFO(run.all());
  REQUIRE(run.reports.size() == 2);
  CHECK(run.result.rank_codes[0] == 4);
  // The survivor's own report: it gave up after the timeout it was given, naming the dead rank.
  CHECK(contains(run.reports[0], "no progress for 2000 ms while waiting for rank 1"));
}

TEST_CASE(
    "ring path, world 4: each survivor names its ring neighbour as such, and the rank that died") {
  // Rank 2 dies: rank 3 waits for it, rank 0 for rank 3 (alive), rank 1 for rank 0. Rank 0's
  // error, the one a user reads first, named rank 3 as if it had stopped.
  auto run = launch_comm_check(4,
                               {"--scenario", "die", "--victim", "2", "--timeout-ms", "2000",
                                "--option", "shared_memory=false"},
                               /*stop_all=*/false);
  INFO(run.all());
  REQUIRE(run.reports.size() == 4);
  CHECK(contains(run.reports[3], "waiting for rank 2 (the rank before this one in the ring"));
  CHECK(contains(run.reports[0], "waiting for rank 3 (the rank before this one in the ring"));
  CHECK(contains(run.reports[0], "the rank that stopped is the one whose own error is missing"));
  // Counting back by the step each stalled at, every survivor names the rank that died: rank 3
  // at step 0 (its neighbour itself), ranks 0 and 1 at steps 1 and 2 of the reduce-scatter.
  CHECK(contains(run.reports[3], "that rank itself most likely stopped"));
  CHECK(contains(run.reports[0], "the rank that stopped is most likely rank 2"));
  CHECK(contains(run.reports[1], "the rank that stopped is most likely rank 2"));
}

TEST_CASE("ranks that call a collective with different sizes fail, on both paths, never a result") {
  for (const std::string option : {"shared_memory=true", "shared_memory=false"}) {
    CAPTURE(option);
    // Rank 1 of 3 gives 100 elements where the others give 96: whichever rank sees it first
    // fails, and the job ends (no rank waits out a 20 s timeout).
    auto run = launch_comm_check(3,
                                 {"--scenario", "mismatch", "--victim", "1", "--option", option});
    INFO(run.all());
    CHECK(run.result.exit_code != 0);
    CHECK(contains(run.all(), "different sizes"));
    CHECK_FALSE(contains(run.all(), "elements completed"));
  }
}

TEST_CASE(
    "an all_gather met by a reduce_scatter of the same size fails on both paths, naming both, "
    "never a result") {
  // On shared memory the ranks publish their op's kind; on the ring it is in every message's
  // tag, and the receive compares it (before, the ring matched the messages by size alone and
  // returned the other op's bytes). Ranks 0 and 2 reduce-scatter, rank 1 all-gathers: on the
  // ring, rank 1 receives rank 0's message and rank 2 rank 1's, whichever fails first.
  for (const std::string option : {"shared_memory=true", "shared_memory=false"}) {
    CAPTURE(option);
    auto run = launch_comm_check(3, {"--scenario", "crossed", "--victim", "1", "--option", option});
    INFO(run.all());
    CHECK(run.result.exit_code != 0);
    const bool named = contains(run.all(), "called all_gather where rank") ||
                       contains(run.all(), "called reduce_scatter where rank 1 called all_gather");
    CHECK(named);
    CHECK(contains(run.all(), "ranks issued different collectives"));
    CHECK_FALSE(contains(run.all(), "no progress for"));  // at once, not after the timeout
    CHECK_FALSE(contains(run.all(), "completed"));
  }
}

TEST_CASE("peer_error_handling = true: a dead peer is reported as unreachable or silent") {
  auto run = launch_comm_check(2,
                               {"--scenario", "die", "--victim", "1", "--timeout-ms", "3000",
                                "--option", "shared_memory=false,peer_error_handling=true"},
                               /*stop_all=*/false);
  INFO(run.all());
  CHECK(run.result.rank_codes[0] == 4);
  // Rank 0's own report names the dead peer: UCX found it unreachable, or the transport's stall
  // check ran out first ("no progress for 3000 ms while waiting for rank 1"; the handle's own
  // wait, 2 x 3000 + 1000 ms, is longer). all() prefixes every rank's report with "rank N", so
  // it alone proves nothing.
  REQUIRE(run.reports.size() == 2);
  const std::string& survivor = run.reports[0];
  CHECK((contains(survivor, "rank 1 is unreachable") ||
         contains(survivor, "while waiting for rank 1")));
}

TEST_CASE("a transport list UCX refuses is a config error naming the option") {
  auto run = launch_comm_check(1,
                               {"--scenario", "collectives", "--option", "tls=no_such_transport"});
  INFO(run.all());
  CHECK(run.result.exit_code != 0);
  CHECK(contains(run.all(), "plugin.comm_ucx.tls"));
}
