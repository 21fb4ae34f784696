// Skipping a test case that cannot check what its name says on this machine, so that CTest
// reports it as Skipped, with its reason, never as Passed. ZT_SKIP prints "zt-skip: <reason>",
// the marker cmake/ZtTests.cmake makes every test's SKIP_REGULAR_EXPRESSION, and returns from the
// test case: call it before the case checks anything. scripts/test.sh lists the skipped tests
// and their reasons at the end of a run.
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

}  // namespace zt::test

#define ZT_SKIP(reason)             \
  do {                              \
    ::zt::test::print_skip(reason); \
    return;                         \
  } while (0)

#define ZT_SKIP_UNLESS_CI(reason)                                                            \
  do {                                                                                       \
    if (::zt::test::in_ci()) {                                                               \
      FAIL("under CI, where scripts/setup.sh provides it, this is a failure: " << (reason)); \
    }                                                                                        \
    ZT_SKIP(reason);                                                                         \
  } while (0)
