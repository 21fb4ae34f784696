// The launcher's handling of ranks' stderr: whole lines only, and the failure it reports is the
// rank whose error printed first, with that error's line and exit code. Ranks here are small
// shell scripts, so the timing of each write is under the test's control.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <sstream>

#include "../test_util.h"
#include "zt/host/launcher.h"

using zt::test::contains;
using zt::test::TempDir;

namespace {

struct Captured {
  zt::LaunchResult result;
  std::vector<std::string> lines;  // what the launcher wrote to its stderr
};

// Runs `script` as every rank (sh -c; $RANK is set), with the launcher's stderr in a file.
Captured launch_script(int nproc, const std::string& script) {
  TempDir dir;
  const std::string path = dir.file("stderr.txt");
  int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(file >= 0);
  int saved = dup(2);
  dup2(file, 2);
  close(file);
  zt::LaunchSpec spec;
  spec.nproc = nproc;
  spec.argv = {"/bin/sh", "-c", script};
  spec.timeout = std::chrono::seconds(60);
  Captured c;
  try {
    c.result = zt::launch_local(spec);
  } catch (...) {
    dup2(saved, 2);
    close(saved);
    throw;
  }
  dup2(saved, 2);
  close(saved);
  std::istringstream text(zt::test::read_file(path));
  for (std::string line; std::getline(text, line);) c.lines.push_back(line);
  return c;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST_CASE("ranks that fail together, each writing its error in pieces, never share a line") {
  // Each rank writes its prefix, pauses, then the rest: straight onto one terminal, these
  // would read "zt: [rank 0] zt: [rank 1] ...".
  Captured c = launch_script(3, "printf 'zt: [rank %s] ' $RANK >&2; sleep 0.3; "
                                "printf 'internal error: the same for all\\n' >&2; exit 7");
  INFO(joined(c.lines));
  CHECK(c.result.exit_code == 7);
  REQUIRE(c.lines.size() == 3);
  for (const auto& line : c.lines) {
    CHECK(line.rfind("zt: [rank ", 0) == 0);
    CHECK(contains(line, "] internal error: the same for all"));
    CHECK(line.find("zt: ", 1) == std::string::npos);
  }
  REQUIRE(c.result.failed_rank >= 0);
  CHECK(c.result.error_line ==
        "zt: [rank " + std::to_string(c.result.failed_rank) + "] internal error: the same for all");
  // The first line printed and the rank named are the same rank.
  CHECK(c.lines[0] == c.result.error_line);
}

TEST_CASE("the failure named is the error printed first, even if that rank ends last") {
  // Rank 2 fails first but takes longer to exit; ranks 0 and 1 fail after it and exit at once.
  Captured c = launch_script(
      3, "if [ $RANK = 2 ]; then echo 'zt: [rank 2] io error: disk gone' >&2; sleep 0.5; "
         "exit 5; fi; sleep 0.2; echo \"zt: [rank $RANK] comm error: peer left\" >&2; exit 4");
  INFO(joined(c.lines));
  CHECK(c.result.failed_rank == 2);
  CHECK(c.result.exit_code == 5);
  CHECK(c.result.error_line == "zt: [rank 2] io error: disk gone");
  CHECK(contains(c.result.message, "rank 2 (pid "));
  CHECK(contains(c.result.message, "exited with code 5"));
  REQUIRE(!c.lines.empty());
  CHECK(c.lines[0] == "zt: [rank 2] io error: disk gone");
}

TEST_CASE(
    "a rank's last words without a newline still come out whole, and a hung rank is stopped") {
  Captured c = launch_script(
      2, "if [ $RANK = 1 ]; then printf 'zt: [rank 1] config error: no newline' >&2; exit 2; fi; "
         "exec sleep 100");
  INFO(joined(c.lines));
  CHECK(c.result.exit_code == 2);
  CHECK(c.result.failed_rank == 1);
  CHECK(c.result.error_line == "zt: [rank 1] config error: no newline");
  CHECK(c.result.rank_codes[0] == 128 + 15);  // stopped by the launcher after the settle time
  CHECK(contains(c.result.message, "stopping the other 1 rank(s)"));
  REQUIRE(c.lines.size() == 1);
  CHECK(c.lines[0] == "zt: [rank 1] config error: no newline");
}
