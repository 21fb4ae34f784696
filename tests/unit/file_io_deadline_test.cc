// zt/host/file_io_deadline.h: a file operation still blocked after its limit ends the process,
// naming it; one that returns in time changes nothing. Each case runs in a forked child, the
// process the watchdog ends, with its stderr on a pipe.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "../test_util.h"
#include "zt/host/file_io_deadline.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Ended {
  int status = -1;  // waitpid's
  std::string stderr_text;
  double seconds = 0;
};

// Runs `body` in a forked child (exit 0 when it returns) and collects what it wrote on stderr,
// for 20 s at most (then the child is killed and the case fails on its status).
Ended run_in_child(const std::function<void()>& body) {
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  const auto start = Clock::now();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    body();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  Ended ended;
  char buffer[4096];
  for (;;) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0) {
      ::kill(child, SIGKILL);
      break;
    }
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    ended.stderr_text.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  ::waitpid(child, &ended.status, 0);
  ended.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return ended;
}

}  // namespace

TEST_CASE("file I/O deadline: a blocked operation ends the process, naming it, after its limit") {
  // This process's watchdog runs (and holds its lock at times) when the child is forked: the
  // child starts its own.
  { const zt::FileIoDeadline parent("a scope of the parent's", 10s, "unused"); }
  const Ended ended = run_in_child([] {
    {
      const zt::FileIoDeadline quick("opening /quick/file", 1s, "unused");
      std::this_thread::sleep_for(10ms);
    }
    std::this_thread::sleep_for(1200ms);  // past the closed scope's limit: it must not fire
    zt::add_file_io_last_words([] { return std::string("last words ran"); });
    zt::set_file_io_line_start([] { return std::string("test: "); });
    const zt::FileIoDeadline outer("opening the checkpoint", 400ms, "raise the limit");
    const zt::FileIoDeadline inner("reading 16 bytes of /slow/file", 10s, "the inner way");
    std::this_thread::sleep_for(8s);  // a read that does not come back
  });
  INFO(ended.stderr_text);
  REQUIRE(WIFEXITED(ended.status));
  CHECK(WEXITSTATUS(ended.status) == 5);
  // Exit 5, not the 0 the child's end gives: ended by the deadline, after 1.2 s of the first part
  // and the outer limit.
  CHECK(ended.seconds >= 1.6);
  CHECK_FALSE(zt::test::contains(ended.stderr_text, "/quick/file"));
  // The innermost operation is named, with the scope whose limit passed; the error comes last.
  const std::string error =
      "test: io error: reading 16 bytes of /slow/file (while opening the checkpoint) has not "
      "returned after 0.4 s: ";
  const size_t at = ended.stderr_text.find(error);
  REQUIRE(at != std::string::npos);
  CHECK(ended.stderr_text.find("test: last words ran\n") < at);
  const std::string tail = "; raise the limit\n";
  CHECK(ended.stderr_text.size() >= tail.size());
  CHECK(ended.stderr_text.compare(ended.stderr_text.size() - tail.size(), tail.size(), tail) == 0);
}

TEST_CASE("file I/O deadline: operations that return in time, on several threads, end nothing") {
  const Ended ended = run_in_child([] {
    std::thread other([] {
      for (int i = 0; i < 50; ++i) {
        const zt::FileIoDeadline scope("reading on another thread", 2s, "unused");
        std::this_thread::sleep_for(5ms);
      }
    });
    for (int i = 0; i < 50; ++i) {
      const zt::FileIoDeadline scope("reading on the main thread", 2s, "unused");
      std::this_thread::sleep_for(5ms);
    }
    other.join();
    std::this_thread::sleep_for(2200ms);  // every limit passed with no scope open
  });
  INFO(ended.stderr_text);
  REQUIRE(WIFEXITED(ended.status));
  CHECK(WEXITSTATUS(ended.status) == 0);
  CHECK(ended.stderr_text.empty());
}
