// Starts N ranks of zt_comm_check through zt's launcher and collects what each rank reported.
// Shared by the multi-process tests and every comm plugin's own tests.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "../test_util.h"
#include "zt/host/launcher.h"

namespace zt::test {

struct RankReports {
  zt::LaunchResult result;
  std::vector<std::string> reports;  // per rank: "OK" or its failure
  double seconds = 0;                // wall time of the whole job

  std::string all() const {
    std::string s = result.message + "\n";
    for (size_t r = 0; r < reports.size(); ++r)
      s += "rank " + std::to_string(r) + ": " + reports[r];
    return s;
  }
};

// `stop_all`: the launcher stops survivors when a rank fails; false lets them detect it.
inline RankReports launch_comm_check(
    int nproc, const std::vector<std::string>& args, bool stop_all = true,
    std::chrono::milliseconds job_limit = std::chrono::minutes(4)) {
  TempDir out;
  zt::LaunchSpec spec;
  spec.nproc = nproc;
  spec.argv = {ZT_TEST_COMM_CHECK};
  spec.fork_ranks = true;
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = {{"ZT_CHECK_OUT", out.path().string()}};
  spec.stop_all_on_failure = stop_all;
  spec.timeout = job_limit;
  auto t0 = std::chrono::steady_clock::now();
  RankReports ranks;
  ranks.result = zt::launch_local(spec);
  ranks.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int r = 0; r < nproc; ++r)
    ranks.reports.push_back(read_file(out.file("rank" + std::to_string(r) + ".txt")));
  return ranks;
}

}  // namespace zt::test
