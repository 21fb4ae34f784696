// finishing_work: an op's Work whose first successful wait() also runs the step that makes its
// result usable: decoding a coded collective's bytes (zero/coded_collectives.cc), copying a
// host-staged collective's result into its output on the device
// (compose/staged_communicator.cc). The step runs once, on the thread of that wait, and then lets
// go of what it held; an error from it is rethrown by that wait and every later one, and
// reported by exception(). A failed op runs nothing and rethrows its own error.
#pragma once

#include <functional>
#include <memory>

#include "zt/work.h"

namespace zt {

//   inner:  in, the op's own Work.
//   finish: in, what makes the result usable; it may throw.
std::shared_ptr<Work> finishing_work(std::shared_ptr<Work> inner, std::function<void()> finish);

}  // namespace zt
