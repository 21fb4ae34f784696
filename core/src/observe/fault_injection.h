// Fault injection into a real job, for the failure-path tests: ZT_TEST_FAULT (flight_recorder.h)
// parsed once per process, which the observed communicator and tier act on to skip a collective
// or stall a read.
// Thread safety: injected_fault() may be called from any thread.
#pragma once

#include <cstdint>
#include <string>

namespace zt {

struct InjectedFault {
  std::string kind;  // "skip_collective", "stall_read" or "" (none)
  int rank = -1;     // the rank it hits
  int64_t nth = 0;   // which collective (sequence number) or which read (1-based)
};

// ZT_TEST_FAULT as set when first asked; an unparsable value is reported on stderr once and
// ignored (it is a test hook, not a user setting).
const InjectedFault& injected_fault();
// This process's rank as its launcher's environment says (RANK), 0 when unset.
int env_rank();

}  // namespace zt
