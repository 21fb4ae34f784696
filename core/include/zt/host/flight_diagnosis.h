// The diagnosis of a failed or hung job from its ranks' flight records (flight_recorder.h): which
// collective the job waits in, and which rank holds it back and what that rank is doing; or the
// first collective the ranks disagree on. What zt's launcher prints after a failure and what
// `trainer flight RUN_DIR` prints for jobs other launchers ran.
// Thread safety: a free function of the files it reads.
#pragma once

#include <string>

#include "zt/api.h"

namespace zt {

struct FlightDiagnosis {
  // One line, e.g. "rank 1 waits in all_gather #812 (6.0 MiB, unit 3 forward) on world since
  // 30.0 s; rank 0's last completed is #811 and it is in offload read of ..."; else each rank's
  // last completed collective and what it does. Ranks whose file is missing are named. "" when
  // no file is there.
  std::string line;
  // A rank waits in a collective, or the ranks disagree on one: the line explains a hang or a
  // mismatch (a job that failed for another reason gets no line from the launcher).
  bool found = false;
};

// Reads <dir>/rank-N.json for N in [0, world). Never throws but bad_alloc.
ZT_API FlightDiagnosis diagnose_flight(const std::string& dir, int world);

}  // namespace zt
