// The scaffolding every multi-process test worker shares: a check that reports instead of
// aborting, and a runner that writes "OK ..." or the failure to $ZT_CHECK_OUT/rank<r>.txt (what
// the test driver reads) and maps it to the process exit code: 0, 1 for a failed check, or the
// zt::Error's own code.
#pragma once

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>

#include "zt/error.h"

namespace zt::test {

struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(bool ok, const std::string& what) {
  if (!ok) throw CheckFailed(what);
}

// Runs `body` (which returns the success text, starting with "OK") as rank `rank`; the report is
// $ZT_CHECK_OUT/<report>.txt, rank<r>.txt unless a worker running several cases names its own.
inline int run_rank_check(int rank, const std::function<std::string()>& body,
                          const std::string& report_name = "") {
  const char* dir = std::getenv("ZT_CHECK_OUT");
  const std::string path = std::string(dir ? dir : ".") + "/" +
                           (report_name.empty() ? "rank" + std::to_string(rank) : report_name) +
                           ".txt";
  auto report = [&](const std::string& text) {
    std::ofstream(path) << text << "\n";
    if (text.rfind("OK", 0) != 0) std::cerr << "[rank " << rank << "] " << text << "\n";
  };
  try {
    report(body());
    return 0;
  } catch (const CheckFailed& e) {
    report(std::string("CHECK FAILED: ") + e.what());
    return 1;
  } catch (const zt::Error& e) {
    report(std::string(e.kind_name()) + " error: " + e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    report(std::string("exception: ") + e.what());
    return 7;
  }
}

}  // namespace zt::test
