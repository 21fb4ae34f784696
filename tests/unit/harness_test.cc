// The test harness itself, run by CTest through tests/expect.sh rather than as ordinary cases:
// each case here fails on purpose (doctest's should_fail turns that into the executable's
// success), and what matters is how it failed.
//  - CHECK stays doctest's even in a file that includes LibTorch after doctest (the order that
//    let glog's aborting CHECK through): a failed CHECK is counted and the case goes on.
//  - A skip after a failed check (tests/skip.h) fails the case instead of printing the marker
//    that would make CTest report it Skipped.
#include <doctest/doctest.h>

#include <ATen/ATen.h>

#include <string_view>

#include "../skip.h"

// The text CHECK expands to after every header above: doctest's names doctest's own functions,
// glog's and LibTorch's own fallback name their loggers.
#define ZT_EXPANDED(...) ZT_STRINGIZED(__VA_ARGS__)
#define ZT_STRINGIZED(...) #__VA_ARGS__
static_assert(std::string_view(ZT_EXPANDED(CHECK(true))).find("doctest::") !=
                  std::string_view::npos,
              "CHECK is not doctest's here: tests/doctest_prelude.h did not come first");

TEST_CASE("harness: a failed CHECK after LibTorch's headers is counted, and the case goes on" *
          doctest::should_fail()) {
  CHECK(at::ones({2}).sum().item<float>() == 3.0f);
  MESSAGE("went on after a failed CHECK");
}

TEST_CASE("harness: a skip after a failed check fails the case" * doctest::should_fail()) {
  CHECK(1 + 1 == 3);
  ZT_SKIP("planted: a skip after a failed check");
}
