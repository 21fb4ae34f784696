// doctest for a test file that includes LibTorch's headers first. Debian's LibTorch logs through
// glog, whose CHECK* macros collide with doctest's: this drops glog's before doctest defines its
// own. Include it after every LibTorch header, in files that use no glog checks.
#pragma once

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LT
#undef CHECK_LE
#undef CHECK_GT
#undef CHECK_GE
#include <doctest/doctest.h>
