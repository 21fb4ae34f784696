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
