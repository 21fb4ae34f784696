// zt/host/child_process.h: a child started with spawn_logged does not outlive a parent killed
// outright (trainer ab and tune run their trainer jobs this way; a SIGKILLed tune left its trial
// training for its whole run.steps).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "../test_util.h"
#include "zt/host/child_process.h"

namespace {

// Whether process `pid` has ended: gone, or a zombie its new parent has yet to reap.
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, name, state;
  if (!(stat >> pid_field >> name >> state)) return true;
  return state == "Z" || state == "X";
}

template <typename Condition>
bool within(std::chrono::seconds limit, Condition condition) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

TEST_CASE("spawn_logged: the child of a parent killed outright gets SIGTERM and ends") {
  zt::test::TempDir dir;
  const std::string pid_file = dir.file("child.pid");
  // The parent, a process of its own: starts the child (a shell that writes its pid and becomes
  // a long sleep) and waits until it is killed.
  const pid_t parent = ::fork();
  REQUIRE(parent >= 0);
  if (parent == 0) {
    try {
      zt::spawn_logged({"/bin/sh", "-c",
                        "echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file +
                            " && exec sleep 120"},
                       dir.file("child.log"));
    } catch (...) {
      ::_exit(1);
    }
    for (;;) ::pause();
  }
  const bool started = within(std::chrono::seconds(30),
                              [&] { return std::filesystem::exists(pid_file); });
  pid_t child = -1;
  if (started) std::ifstream(pid_file) >> child;
  ::kill(parent, SIGKILL);
  int status = 0;
  ::waitpid(parent, &status, 0);
  REQUIRE(started);
  REQUIRE(child > 0);
  const bool child_ended = within(std::chrono::seconds(30), [&] { return ended(child); });
  if (!child_ended) ::kill(child, SIGKILL);  // leave no sleep behind either way
  CHECK(child_ended);
}

TEST_CASE("spawn_logged: the child runs without the launchers' rank variables, with the rest, "
          "and one that cannot start says why in its log") {
  // Made before the fork now (unsetenv in the child could wait for good on the environment lock
  // another thread of the parent held at the fork): still the same environment.
  zt::test::TempDir dir;
  ::setenv("RANK", "3", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  ::setenv("ZT_CHILD_TEST_KEPT", "kept value", 1);
  const std::string log = dir.file("env.log");
  const int code = zt::run_logged({"/usr/bin/env"}, log);
  ::unsetenv("RANK");
  ::unsetenv("MASTER_PORT");
  ::unsetenv("ZT_CHILD_TEST_KEPT");
  CHECK(code == 0);
  const std::string env = "\n" + zt::test::read_file(log);  // each variable after a newline
  CHECK(zt::test::contains(env, "\nZT_CHILD_TEST_KEPT=kept value\n"));
  CHECK(zt::test::contains(env, "\nPATH="));
  CHECK_FALSE(zt::test::contains(env, "\nRANK="));
  CHECK_FALSE(zt::test::contains(env, "\nMASTER_PORT="));

  const std::string missing = dir.file("no-such-program");
  CHECK(zt::run_logged({missing}, dir.file("missing.log")) == 127);
  CHECK(zt::test::read_file(dir.file("missing.log")) ==
        "zt: cannot run " + missing + ": No such file or directory\n");
}
