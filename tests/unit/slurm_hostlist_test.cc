// Slurm's hostlist syntax (SLURM_JOB_NODELIST): zt's expansion against what the syntax means, its
// refusals, and against Slurm's own `scontrol show hostnames` on fixed and random lists. (The
// rendezvous a Slurm or mpirun job derives from it: rank_env_test.cc.)
#include <doctest/doctest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "zt/error.h"
#include "zt/host/slurm_hostlist.h"

#include "../skip.h"
#include "../test_util.h"

namespace {

using Hosts = std::vector<std::string>;

Hosts expand(const std::string& list) { return zt::expand_slurm_hostlist(list, "LIST"); }

std::string refusal(const std::string& list) {
  try {
    expand(list);
  } catch (const zt::ConfigError& e) {
    return e.what();
  }
  return "";
}

// A random hostlist in Slurm's syntax: 1-3 names, each plain or with 1-2 brackets of numbers
// and ranges, some zero-padded.
std::string random_list(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* stems[] = {"gpu", "n", "rack", "login", "c-", "node"};
  std::string list;
  for (int h = pick(1, 3); h > 0; --h) {
    if (!list.empty()) list += ',';
    list += stems[pick(0, 5)];
    const int brackets = pick(0, 2);
    for (int b = 0; b < brackets; ++b) {
      if (b > 0) list += pick(0, 1) ? "-s" : "x";
      list += '[';
      const int width = pick(1, 3);
      for (int r = pick(1, 3); r > 0; --r) {
        const int first = pick(0, 120), last = first + pick(0, 3);
        auto padded = [&](int v) {
          std::string s = std::to_string(v);
          return std::string(s.size() < static_cast<size_t>(width) ? width - s.size() : 0, '0') + s;
        };
        list += padded(first);
        if (last != first) list += "-" + padded(last);
        if (r > 1) list += ',';
      }
      list += ']';
    }
  }
  return list;
}

}  // namespace

TEST_CASE("Slurm hostlists: names, ranges, zero padding, several brackets, in Slurm's order") {
  CHECK(expand("login1") == Hosts{"login1"});
  CHECK(expand("gpu[01-04,07],login1") ==
        Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "login1"});
  CHECK(expand("n[8-11]") == Hosts{"n8", "n9", "n10", "n11"});
  CHECK(expand("x[009-011],y") == Hosts{"x009", "x010", "x011", "y"});
  CHECK(expand("n[1-010]") == Hosts{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"});
  CHECK(expand("a[1-2]b[3-4]") == Hosts{"a1b3", "a1b4", "a2b3", "a2b4"});
  CHECK(expand("rack1-n[1,3],rack2-n[2]") == Hosts{"rack1-n1", "rack1-n3", "rack2-n2"});
  CHECK(expand("a,b,a") == Hosts{"a", "b", "a"});
  CHECK(expand("n[1-2],") == Hosts{"n1", "n2"});
  CHECK(expand("[1-2]") == Hosts{"1", "2"});
}

TEST_CASE("Slurm hostlists Slurm refuses are refused, naming the variable and the way out") {
  for (const char* bad : {"n[10-8]", "n[1-2", "n[]", "n[a-b]", "n[1-2]]", "n[1-3]2", "node[1-3]-ib",
                          "n[[1]]", "", ","}) {
    INFO(bad);
    const std::string what = refusal(bad);
    CHECK(zt::test::contains(what, "LIST='" + std::string(bad) + "' is not a Slurm hostlist"));
    CHECK(zt::test::contains(what, "set MASTER_ADDR"));
  }
  CHECK(zt::test::contains(refusal("n[1-2000000]"), "more than 1048576 hosts"));
  CHECK(zt::test::contains(refusal("a[1-2000]b[1-2000]"), "more than 1048576 hosts"));
  // Counted over the bracket as its ranges add up, not per range (each of these is below the
  // limit), so a long list of ranges is refused before the rest of it is expanded.
  CHECK(zt::test::contains(refusal("n[0-999999,0-999999,0-999999]"), "more than 1048576 hosts"));
}

TEST_CASE("Slurm hostlists: zt's expansion equals scontrol show hostnames, fixed and random") {
  if (zt::test::run_command("command -v scontrol").exit_code != 0) {
    if (zt::test::in_ci()) FAIL("scontrol is missing: scripts/setup.sh installs slurm-client");
    ZT_SKIP("scontrol (Debian's slurm-client) is not installed: scripts/setup.sh installs it");
  }
  // scontrol reads a slurm.conf before it expands anything; a minimal one, no daemon.
  zt::test::TempDir dir;
  zt::test::write_file(dir.file("slurm.conf"),
                       "ClusterName=zt\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\n"
                       "PartitionName=p Nodes=localhost\n");
  std::vector<std::string> lists = {
      "gpu[01-04,07],login1",    "n[8-11]", "x[009-011],y",    "n[1-010]", "a[1-2]b[3-4]",
      "rack1-n[1,3],rack2-n[2]", "a,b,a",   "n[1-3,5-6]x[1-2]"};
  std::mt19937 rng(20261129);
  for (int i = 0; i < 40; ++i) lists.push_back(random_list(rng));
  for (const std::string& list : lists) {
    INFO(list);
    const auto r = zt::test::run_command("SLURM_CONF=" + dir.file("slurm.conf") +
                                         " scontrol show hostnames '" + list + "' 2>&1");
    REQUIRE(r.exit_code == 0);
    Hosts slurm;
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) slurm.push_back(line);
    CHECK(expand(list) == slurm);
  }
}
