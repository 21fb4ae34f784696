// The launcher's handling of ranks' stderr: whole lines only, and the failure it reports is the
// rank whose error printed first (a peer's comm error last), with that error's line and exit
// code. Ranks here are small shell scripts, so the timing of each write is under the test's
// control. Then ranks forked from one start (LaunchSpec::fork_ranks), as the probe program
// zt_fork_probe sees them.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "../test_util.h"
#include "zt/error.h"
#include "zt/host/launcher.h"

using zt::test::contains;
using zt::test::TempDir;

namespace {

struct Captured {
  zt::LaunchResult result;
  std::vector<std::string> lines;  // what the launcher wrote to its stderr
};

// Runs `spec` with the launcher's stderr on `fd` (taken: closed here), and returns its result.
zt::LaunchResult launch_with_stderr(const zt::LaunchSpec& spec, int fd) {
  const int saved = dup(2);
  dup2(fd, 2);
  close(fd);
  zt::LaunchResult result;
  try {
    result = zt::launch_local(spec);
  } catch (...) {
    dup2(saved, 2);
    close(saved);
    throw;
  }
  dup2(saved, 2);
  close(saved);
  return result;
}

// Runs `spec` with the launcher's stderr in a file, and returns the result and its lines.
Captured launch_captured(const zt::LaunchSpec& spec) {
  TempDir dir;
  const std::string path = dir.file("stderr.txt");
  int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(file >= 0);
  Captured c;
  c.result = launch_with_stderr(spec, file);
  std::istringstream text(zt::test::read_file(path));
  for (std::string line; std::getline(text, line);) c.lines.push_back(line);
  return c;
}

// Runs `script` as every rank (sh -c; $RANK is set).
Captured launch_script(int nproc, const std::string& script) {
  zt::LaunchSpec spec;
  spec.nproc = nproc;
  spec.argv = {"/bin/sh", "-c", script};
  spec.timeout = std::chrono::seconds(60);
  return launch_captured(spec);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// The result names `rank`, with its exit `code` and its error `line`; and the first line the
// ranks printed is `first_line` ('' = not checked).
void check_names(const Captured& c, int rank, int code, const std::string& line,
                 const std::string& first_line = "") {
  CHECK(c.result.failed_rank == rank);
  CHECK(c.result.exit_code == code);
  CHECK(c.result.error_line == line);
  if (first_line.empty()) return;
  REQUIRE(!c.lines.empty());
  CHECK(c.lines[0] == first_line);
}

}  // namespace

TEST_CASE("a Ctrl-C while the ranks stop after a failure is a first one: they keep their grace") {
  // Rank 1 fails; rank 0 takes the launcher's SIGTERM, and needs a second to end. One Ctrl-C in
  // that second used to be taken for a second one ("again"): SIGKILL to every rank at once.
  TempDir dir;
  const std::string term = dir.file("term");
  zt::LaunchSpec spec;
  spec.nproc = 2;
  spec.argv = {"/bin/sh", "-c",
               "if [ $RANK = 1 ]; then exit 3; fi; trap 'touch " + term +
                   "; kill $!; sleep 1; exit 0' TERM; sleep 100 & wait"};
  spec.timeout = std::chrono::seconds(60);
  std::thread signaller([&term] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!std::filesystem::exists(term) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    // The launcher's handler takes it, not this process (which one after the launch would end).
    if (std::filesystem::exists(term)) kill(getpid(), SIGINT);
  });
  const Captured c = launch_captured(spec);
  signaller.join();
  INFO(joined(c.lines));
  INFO(c.result.message);
  REQUIRE(std::filesystem::exists(term));
  CHECK(c.result.failed_rank == 1);
  CHECK(c.result.rank_codes == std::vector<int>{0, 3});
  CHECK_FALSE(contains(c.result.message, "again"));
}

TEST_CASE(
    "without a drain time, a second Ctrl-C a second after the first kills the ranks at once") {
  // python3 -m zt.launch's launcher: the first Ctrl-C stops the ranks with their grace (they
  // ignore SIGTERM here), the second, 1.2 s later, kills them instead of waiting it out.
  zt::LaunchSpec spec;
  spec.nproc = 2;
  spec.argv = {"/bin/sh", "-c", "trap '' TERM INT; exec sleep 30"};  // ignored across exec
  spec.grace = std::chrono::seconds(20);
  spec.timeout = std::chrono::seconds(60);
  std::thread signaller([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(getpid(), SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    kill(getpid(), SIGINT);
  });
  const auto start = std::chrono::steady_clock::now();
  const Captured c = launch_captured(spec);
  signaller.join();
  INFO(c.result.message);
  CHECK(contains(c.result.message, "again; killing all ranks"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("ranks that outlive the drain are killed, and the result says the launcher did it") {
  // A save that takes longer than the drain: the launcher's SIGKILL must not read as the OOM
  // killer's (the witness calls any SIGKILL that), and the limit to raise is named.
  zt::LaunchSpec spec;
  spec.nproc = 2;
  spec.argv = {"/bin/sh", "-c", "trap '' TERM INT USR1; exec sleep 30"};  // ignored across exec
  spec.drain = std::chrono::seconds(1);
  spec.drain_limit = "3 x launch.timeout_s + 2 x checkpoint.timeout_s";
  spec.timeout = std::chrono::seconds(60);
  std::thread signaller([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(getpid(), SIGTERM);
  });
  const auto start = std::chrono::steady_clock::now();
  const Captured c = launch_captured(spec);
  signaller.join();
  INFO(c.result.message);
  CHECK(c.result.exit_code == 128 + SIGKILL);
  CHECK(contains(c.result.message, "was killed by signal 9"));
  CHECK(contains(c.result.message,
                 "; the launcher killed it: the ranks had not stopped 1 s after it passed the "
                 "signal on (3 x launch.timeout_s + 2 x checkpoint.timeout_s)"));
  CHECK_FALSE(contains(c.result.message, "memory"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}

TEST_CASE("a rank killed from outside keeps its own verdict when the launcher kills the others") {
  // Rank 1 dies of SIGKILL (as the OOM killer's victim does); rank 0, waiting for it, outlives
  // its grace and is killed by the launcher. The failure named is rank 1's, not the launcher's.
  zt::LaunchSpec spec;
  spec.nproc = 2;
  spec.argv = {"/bin/sh", "-c",
               "if [ $RANK = 1 ]; then sleep 0.3; kill -9 $$; fi; trap '' TERM; exec sleep 30"};
  spec.grace = std::chrono::seconds(1);
  spec.timeout = std::chrono::seconds(60);
  const Captured c = launch_captured(spec);
  INFO(c.result.message);
  CHECK(c.result.failed_rank == 1);
  CHECK(c.result.rank_codes == std::vector<int>{128 + SIGKILL, 128 + SIGKILL});
  CHECK(contains(c.result.message, "rank 1 (pid"));
  CHECK(contains(c.result.message, "was killed by signal 9"));
  CHECK_FALSE(contains(c.result.message, "the launcher killed it"));
}

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

TEST_CASE("a launcher whose stderr closes runs its ranks on to the end") {
  // As under `trainer ... 2>&1 | head`: the reader is gone before the ranks print. The relay's
  // write to a pipe without a reader raises SIGPIPE, which would end the launcher (and here this
  // test) and leave the ranks to die of their parent's death.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  close(fds[0]);
  zt::LaunchSpec spec;
  spec.nproc = 2;
  spec.argv = {"/bin/sh", "-c", "sleep 0.2; echo line from rank $RANK >&2; exit 0"};
  spec.timeout = std::chrono::seconds(60);
  const zt::LaunchResult result = launch_with_stderr(spec, fds[1]);
  INFO(result.message);
  CHECK(result.exit_code == 0);
  CHECK(result.rank_codes == std::vector<int>{0, 0});
}

TEST_CASE("a launcher whose stderr takes nothing still supervises its ranks, and loses no line") {
  // As under a terminal paused with Ctrl-S or a stuck `tee`: nothing reads the launcher's stderr
  // until its ranks have ended. Rank 0 writes 3 MB of numbered lines, more than the pipes and the
  // relay's backlog hold, and then waits; rank 1 fails. The launcher has to stop rank 0 while
  // nothing is read: its relay used to write on the supervising thread, which blocked there.
  TempDir dir;
  const std::string stopped = dir.file("stopped"), ready = dir.file("ready");
  zt::test::write_file(dir.file("flood.py"),
                       "import os, signal, sys\n"
                       "def stop(*_):\n"
                       "    open(" +
                           std::string("'") + stopped +
                           "', 'w').close()\n"
                           "    os._exit(0)\n"
                           "signal.signal(signal.SIGTERM, stop)\n"
                           "open(" +
                           std::string("'") + ready +
                           "', 'w').close()\n"
                           "for i in range(30000):\n"
                           "    sys.stderr.write('rank 0 line %06d %s\\n' % (i, 'x' * 80))\n"
                           "    sys.stderr.flush()\n"
                           "signal.pause()\n");
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  zt::LaunchSpec spec;
  spec.nproc = 2;
  spec.argv = {"/bin/sh", "-c",
               // Rank 1 fails 2 s after rank 0 can be stopped: time to write its first MiB.
               "if [ $RANK = 1 ]; then while [ ! -e " + ready +
                   " ]; do sleep 0.05; done; sleep 2; exit 3; fi; exec python3 " +
                   dir.file("flood.py")};
  spec.timeout = std::chrono::seconds(60);
  std::string output;
  bool stopped_unread = false;
  std::thread reader([&] {
    // Nothing is read until rank 0 was stopped; after 30 s, the launcher did not do it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!std::filesystem::exists(stopped) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stopped_unread = std::filesystem::exists(stopped);
    char buffer[65536];
    for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;)
      output.append(buffer, static_cast<size_t>(n));
  });
  const zt::LaunchResult result = launch_with_stderr(spec, fds[1]);
  reader.join();
  close(fds[0]);
  INFO(result.message);
  CHECK(stopped_unread);
  CHECK(result.failed_rank == 1);
  CHECK(result.exit_code == 3);
  // Every line rank 0 wrote before it was stopped came through whole and in order.
  std::istringstream lines(output);
  int next = 0;
  bool whole = true;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("rank 0 line ", 0) != 0) continue;
    char expected[32];
    std::snprintf(expected, sizeof expected, "rank 0 line %06d ", next++);
    whole = whole && line == expected + std::string(80, 'x');
  }
  CHECK(whole);
  // Rank 0 was stopped while its writes waited (it never wrote all), after the relay had taken
  // its backlog's 1 MiB (core/src/launch/rank_output.h): the lines held then came through too.
  CHECK(next < 30000);
  CHECK(next * 100 >= (1 << 20));
}

TEST_CASE("a launcher started with SIGCHLD ignored still sees its ranks' exit codes") {
  // An ignored SIGCHLD survives exec: the kernel reaped the ranks itself, and a job that
  // succeeded read as failed (each rank's end unseen).
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGCHLD, &ignore, &old);
  Captured ok = launch_script(2, "exit 0");
  Captured failing = launch_script(2, "[ $RANK = 1 ] && exit 3; exit 0");
  struct sigaction now {};
  sigaction(SIGCHLD, nullptr, &now);
  sigaction(SIGCHLD, &old, nullptr);
  const bool restored = now.sa_handler == SIG_IGN;
  CHECK(restored);  // the caller's setting is back
  INFO(ok.result.message);
  CHECK(ok.result.exit_code == 0);
  CHECK(ok.result.rank_codes == std::vector<int>{0, 0});
  CHECK(failing.result.failed_rank == 1);
  CHECK(failing.result.exit_code == 3);
}

TEST_CASE("the failure named is the error printed first, even if that rank ends last") {
  // Rank 2 fails first but takes longer to exit; ranks 0 and 1 fail after it and exit at once
  // (with errors that are not comm errors, which are named last whenever they printed).
  Captured c = launch_script(
      3, "if [ $RANK = 2 ]; then echo 'zt: [rank 2] io error: disk gone' >&2; sleep 0.5; "
         "exit 5; fi; sleep 0.2; echo \"zt: [rank $RANK] internal error: odd\" >&2; exit 7");
  INFO(joined(c.lines));
  const std::string disk_gone = "zt: [rank 2] io error: disk gone";
  check_names(c, 2, 5, disk_gone, disk_gone);
  CHECK(contains(c.result.message, "rank 2 (pid "));
  CHECK(contains(c.result.message, "exited with code 5"));
}

TEST_CASE("a peer's comm error, though printed first, is not named over a rank's own error") {
  // Rank 0's unwinding closed what rank 1 was using before rank 0 printed why it failed.
  Captured c = launch_script(
      2, "if [ $RANK = 1 ]; then echo 'zt: [rank 1] comm error: store lost' >&2; exit 4; fi; "
         "sleep 0.3; echo 'zt: [rank 0] config error: bad input' >&2; exit 2");
  INFO(joined(c.lines));
  check_names(c, 0, 2, "zt: [rank 0] config error: bad input",
              "zt: [rank 1] comm error: store lost");
}

TEST_CASE(
    "a rank's last words without a newline still come out whole, and a hung rank is stopped") {
  Captured c = launch_script(
      2, "if [ $RANK = 1 ]; then printf 'zt: [rank 1] config error: no newline' >&2; exit 2; fi; "
         "exec sleep 100");
  INFO(joined(c.lines));
  check_names(c, 1, 2, "zt: [rank 1] config error: no newline");
  CHECK(c.result.rank_codes[0] == 128 + 15);  // stopped by the launcher after the settle time
  CHECK(contains(c.result.message, "stopping the other 1 rank(s)"));
  REQUIRE(c.lines.size() == 1);
  CHECK(c.lines[0] == "zt: [rank 1] config error: no newline");
}

namespace {

// One rank's report of tests/multiproc/fork_probe_main.cc: "name value" lines.
std::map<std::string, std::string> probe_report(const TempDir& dir, int rank) {
  std::map<std::string, std::string> fields;
  std::istringstream text(zt::test::read_file(dir.file("rank" + std::to_string(rank) + ".txt")));
  for (std::string name, value; text >> name >> value;) fields[name] = value;
  return fields;
}

// Runs the probe as `nproc` ranks with `mode`, forked from one start or not; reports in `dir`.
Captured launch_probe(const TempDir& dir, int nproc, bool fork_ranks, const std::string& mode) {
  zt::LaunchSpec spec;
  spec.nproc = nproc;
  spec.argv = {ZT_TEST_FORK_PROBE, mode};
  spec.env = {{"ZT_CHECK_OUT", dir.path().string()}};
  spec.fork_ranks = fork_ranks;
  spec.timeout = std::chrono::seconds(60);
  return launch_captured(spec);
}

}  // namespace

TEST_CASE("fork_ranks: the ranks come from one start, as children of the launcher, each its own") {
  // 11 forked ranks: two-digit ranks are written over a two-digit placeholder.
  for (const auto& [forked, nproc] : {std::pair{false, 3}, std::pair{true, 11}}) {
    CAPTURE(forked);
    TempDir dir;
    Captured c = launch_probe(dir, nproc, forked, "exit");
    INFO(joined(c.lines));
    CHECK(c.result.exit_code == 0);
    std::set<std::string> starts, pids;
    std::multiset<std::string> expected_lines;
    for (int r = 0; r < nproc; ++r) {
      CAPTURE(r);
      auto f = probe_report(dir, r);
      CHECK(f["rank"] == std::to_string(r));
      CHECK(f["local_rank"] == std::to_string(r));
      CHECK(f["world"] == std::to_string(nproc));
      CHECK(f["proc_rank"] == std::to_string(r));
      CHECK(f["fork_variable"] == "0");
      CHECK(f["ranks_forked"] == (forked ? "1" : "0"));
      CHECK(f["ppid"] == std::to_string(getpid()));  // supervised (and reaped) by this process
      CHECK(f["self"] == ZT_TEST_FORK_PROBE);
      starts.insert(f["exec_random"]);
      pids.insert(f["pid"]);
      expected_lines.insert("probe rank " + std::to_string(r));
    }
    CHECK(pids.size() == static_cast<size_t>(nproc));
    // Each exec draws its own AT_RANDOM; forks of one start share it.
    CHECK(starts.size() == (forked ? 1u : static_cast<size_t>(nproc)));
    CHECK(std::multiset<std::string>(c.lines.begin(), c.lines.end()) == expected_lines);
  }
}

TEST_CASE("fork_ranks: a forked rank that fails is named with its code and error line") {
  TempDir dir;
  Captured c = launch_probe(dir, 3, true, "fail:1:9");
  INFO(joined(c.lines));
  check_names(c, 1, 9, "rank 1 fails");
  CHECK(contains(c.result.message,
                 "rank 1 (pid " + probe_report(dir, 1)["pid"] + ") exited with code 9"));
  CHECK(c.result.rank_codes == std::vector<int>{0, 9, 0});
}

TEST_CASE("fork_ranks: a program without zt's core cannot start forked ranks, and says so") {
  TempDir dir;
  zt::LaunchSpec spec;
  spec.nproc = 2;
  spec.argv = {"/bin/sh", "-c", "exit 0"};
  spec.fork_ranks = true;
  try {
    zt::launch_local(spec);
    FAIL("launch_local started ranks of a program that cannot fork them");
  } catch (const zt::IoError& e) {
    CHECK(contains(e.what(), "launcher: /bin/sh did not start its 2 ranks: it ended after "
                             "reporting 0 of 2 ranks"));
    CHECK(contains(e.what(), "fork_ranks needs a program linked with zt's core"));
  }
}

TEST_CASE("fork_ranks: a signal to the launcher while the program loads ends the start at once") {
  // A program that never forks its ranks (it sleeps instead): SIGTERM to the launcher must not
  // wait for it, and ends the job as a signal does (128 + 15).
  zt::LaunchSpec spec;
  spec.nproc = 2;
  spec.argv = {"/bin/sleep", "30"};
  spec.fork_ranks = true;
  std::thread signaller([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(getpid(), SIGTERM);  // the launcher's handler takes it, not this process
  });
  // Waiting on, the start would end with the program after 30 s: an IoError, not this result.
  const zt::LaunchResult result = zt::launch_local(spec);
  signaller.join();
  INFO(result.message);
  CHECK(result.launcher_signal == SIGTERM);
  CHECK(result.exit_code == 128 + SIGTERM);
  CHECK(result.rank_codes == std::vector<int>{-1, -1});  // neither rank ever started
}

TEST_CASE("fork_ranks: signals that keep coming while the start ends leave no child behind") {
  // The launcher's handlers do not restart calls, so a signal that came while it waited for the
  // forking process it had just killed cut the wait short: the process stayed a zombie, and one
  // that was still forking handed its ranks to init instead of the launcher. Signals sent without
  // a pause keep landing in that wait (without the fix this failed 5 runs of 5).
  struct sigaction quiet {
  }, old{};
  quiet.sa_handler = [](int) {};  // what the launcher restores as it returns, for later ones
  sigemptyset(&quiet.sa_mask);
  sigaction(SIGTERM, &quiet, &old);
  zt::LaunchSpec spec;
  spec.nproc = 2;
  spec.argv = {"/bin/sleep", "30"};
  spec.fork_ranks = true;
  std::atomic<bool> done{false};
  std::thread signaller([&done] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    while (!done.load()) kill(getpid(), SIGTERM);
  });
  zt::LaunchResult result;
  try {
    result = zt::launch_local(spec);
  } catch (...) {
    done = true;
    signaller.join();
    sigaction(SIGTERM, &old, nullptr);
    throw;
  }
  done = true;
  signaller.join();
  sigaction(SIGTERM, &old, nullptr);
  INFO(result.message);
  CHECK(result.launcher_signal == SIGTERM);
  CHECK(result.exit_code == 128 + SIGTERM);
  // The forking process was reaped: this test has no child left, not even a zombie.
  errno = 0;
  CHECK(waitpid(-1, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

TEST_CASE("fork_ranks: forked ranks die with their launcher") {
  // The launcher runs in a child of this test, which kills it; its ranks, asleep for 5 minutes,
  // must get their parent-death signal although a first process forked them.
  TempDir dir;
  const pid_t launcher = fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    zt::LaunchSpec spec;
    spec.nproc = 2;
    spec.argv = {ZT_TEST_FORK_PROBE, "sleep"};
    spec.env = {{"ZT_CHECK_OUT", dir.path().string()}};
    spec.fork_ranks = true;
    try {
      zt::launch_local(spec);
    } catch (...) {
    }
    _exit(0);
  }
  // Both ranks reported (their files hold the last line once written).
  std::vector<pid_t> ranks;
  for (int i = 0; i < 600 && ranks.size() < 2; ++i) {
    ranks.clear();
    for (int r = 0; r < 2; ++r) {
      auto f = probe_report(dir, r);
      if (f.count("self")) ranks.push_back(std::stoi(f["pid"]));
    }
    if (ranks.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(ranks.size() == 2);
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  // Gone, or a zombie whose new parent has yet to reap it.
  auto ended = [](pid_t pid) {
    const std::string stat = zt::test::read_file("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    return stat.empty() || (paren != std::string::npos && stat.compare(paren + 2, 1, "Z") == 0);
  };
  bool all_ended = false;
  for (int i = 0; i < 100 && !all_ended; ++i) {
    all_ended = ended(ranks[0]) && ended(ranks[1]);
    if (!all_ended) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(all_ended);
}
