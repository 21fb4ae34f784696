// Skipping a test case that cannot check what its name says on this machine, so that CTest
// reports it as Skipped, with its reason, never as Passed. ZT_SKIP prints "zt-skip: <reason>",
// the marker cmake/ZtTests.cmake makes every test's SKIP_REGULAR_EXPRESSION, and returns from the
// test case: call it before the case checks anything. CTest reports a test Skipped when its
// output holds the marker even if it failed, so a skip that comes after a failed check is
// refused (the case fails, naming both): it would turn that failure into Skipped.
// scripts/test.sh lists the skipped tests and their reasons at the end of a run.
// ZT_SKIP_UNLESS_CI is for what scripts/setup.sh installs or CI provides (python3-torch,
// chromium, root for mounts): under CI (the CI variable set, as .ci/run runs) its absence means
// the setup is broken, so the case fails instead.
// Include after doctest.
#pragma once

#include <cstdlib>
#include <iostream>
#include <string>

namespace zt::test {

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0';
}

inline void print_skip(const std::string& reason) {
  std::cout << "zt-skip: " << reason << std::endl;
}

// How many checks the running test case has failed so far (tests/doctest_main.cc counts them).
int checks_failed_in_this_case();

}  // namespace zt::test

#define ZT_SKIP(reason)                                                                            \
  do {                                                                                             \
    if (const int failed = ::zt::test::checks_failed_in_this_case(); failed > 0) {                 \
      FAIL("this case failed " << failed << " check(s) and then asked to be skipped (" << (reason) \
                               << "): a skip comes before the checks, so it cannot "               \
                                  "hide them");                                                    \
    }                                                                                              \
    ::zt::test::print_skip(reason);                                                                \
    return;                                                                                        \
  } while (0)

#define ZT_SKIP_UNLESS_CI(reason)                                                            \
  do {                                                                                       \
    if (::zt::test::in_ci()) {                                                               \
      FAIL("under CI, where scripts/setup.sh provides it, this is a failure: " << (reason)); \
    }                                                                                        \
    ZT_SKIP(reason);                                                                         \
  } while (0)

// Skips the case (fails it under CI) where Debian's chromium is not installed: the reports'
// rendering tests run it headless.
#define ZT_SKIP_WITHOUT_CHROMIUM()                                                   \
  do {                                                                               \
    if (std::system("command -v chromium >/dev/null 2>&1") != 0) {                   \
      ZT_SKIP_UNLESS_CI("chromium is not installed (scripts/setup.sh installs it)"); \
    }                                                                                \
  } while (0)
