// Included before anything else in every translation unit of the test executables that link
// zt_doctest_main (a forced include: tests/CMakeLists.txt), so that CHECK and its kin are
// doctest's reporting checks whatever order a test file includes LibTorch and doctest in. The GPU
// tests, which have a main of their own, include it after LibTorch's headers: the same holds.
// LibTorch logs through glog (Debian's) or through its own glog-like macros (PyTorch's wheels),
// and both define an aborting CHECK(cond) and CHECK_EQ(a, b) and the rest: a test file that
// included doctest first got glog's, so a failed check killed the process with no context and
// no count. Its logging header is included here first and its checks dropped; the header's
// include guard then keeps a later include by LibTorch from defining them again.
#pragma once

#if __has_include(<c10/util/Logging.h>)
#include <c10/util/Logging.h>
#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LT
#undef CHECK_LE
#undef CHECK_GT
#undef CHECK_GE
#endif
#include <doctest/doctest.h>
