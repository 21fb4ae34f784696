// Two ranks of a job started by hand, as a launcher other than zt's starts them (torchrun,
// mpirun, a host each): every rank's own variables, meeting at a free port on 127.0.0.1.
#pragma once

#include <string>

#include "../test_util.h"
#include "zt/host/launcher.h"

namespace zt::test {

struct TwoRanks {
  std::string output;  // rank 1's, then "rank 1 exit N" and "rank 0 exit N"
  std::string rank0;   // rank 0's output
};

// Runs `job` as rank 0 and rank 1 of 2. `before[r]` goes before rank r's variables in its shell
// line: more variables ("LOCAL_RANK=0 LOCAL_WORLD_SIZE=2"), or a folder to start in
// ("cd /x && ").
inline TwoRanks run_two_ranks(const TempDir& dir, const std::string (&before)[2],
                              const std::string& job) {
  const std::string meet = " WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                           std::to_string(zt::pick_free_port("127.0.0.1")) + " ";
  write_file(dir.file("two_ranks.sh"),
             "(" + before[0] + " RANK=0" + meet + job + ") > " + dir.file("rank0.log") +
                 " 2>&1 &\nleader=$!\n(" + before[1] + " RANK=1" + meet + job +
                 ")\necho \"rank 1 exit $?\"\nwait $leader\necho \"rank 0 exit $?\"\n");
  TwoRanks r;
  r.output = run_command("bash " + dir.file("two_ranks.sh")).output;
  r.rank0 = read_file(dir.file("rank0.log"));
  return r;
}

}  // namespace zt::test
