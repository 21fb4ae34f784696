// Collectives for ranks on one host over a ShmWindow. Data moves in rounds of at most the
// window's capacity; each round is: wait until every peer finished reading this rank's
// segment from the last round, publish input (`in_ready`), combine, publish output
// (`out_ready`), copy out, report `done`. Flags carry a round epoch that every rank advances
// identically (ops are issued in the same order everywhere). A wait spins briefly, then sleeps
// on a futex until the flag's owner publishes, so ranks sharing cores do not lose compute to a
// spinning comm thread. Every wait is bounded by the timeout and names the rank it waited for.
// Each round also publishes the size of its op, which peers check against their own: ranks that
// call one collective with different sizes fail at once, naming the rank and both sizes.
// Errors name job ranks (a split's members are named by their rank in the job).
// Thread safety: none; the comm thread owns it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ring.h"
#include "shm_window.h"

namespace zt::ucx {

class ShmCollectives {
 public:
  ShmCollectives(ShmWindow& window, const Group& group, std::chrono::milliseconds timeout)
      : w_(window),
        job_ranks_(group.peers),
        rank_(group.rank),
        world_(group.size()),
        timeout_(timeout) {}

  // Same contracts as the ring versions in ring.h.
  void all_gather(const std::string& what, uint8_t* out, size_t block_bytes);
  void reduce_scatter(const std::string& what, const void* in, void* out, size_t block_elems,
                      ElemType type, ReduceOp reduce);
  // In place over world * block_elems elements.
  void all_reduce(const std::string& what, void* data, size_t block_elems, ElemType type,
                  ReduceOp reduce);
  void broadcast(const std::string& what, uint8_t* buf, size_t bytes, int root);
  void barrier(const std::string& what);

  // Bytes this rank published for peers to read (its "sent" bytes).
  uint64_t published_bytes() const { return published_; }

 private:
  // `op`: which collective the round belongs to (ranks whose calls paired an all-gather with a
  // reduce-scatter of the same size exchanged each other's data without a word); `op_bytes`:
  // the op's size, the same on every rank that called it alike.
  void begin_round(const std::string& what, CommOp op, uint64_t op_bytes);
  // After `in_ready` of the ranks waited for: each called this op with this rank's size.
  void check_same_size(const std::string& what, int only_rank = -1);
  void end_round();
  void publish(ShmFlag ShmControl::*flag);
  // Waits until `flag` of every rank in [first, first + count) reached `epoch`.
  void wait_for(ShmFlag ShmControl::*flag, uint64_t epoch, const char* phase,
                const std::string& what, int only_rank = -1);

  ShmWindow& w_;
  std::vector<int> job_ranks_;  // per member
  int rank_;
  int world_;
  std::chrono::milliseconds timeout_;
  uint64_t epoch_ = 0;     // the round in progress (or last finished)
  uint64_t op_bytes_ = 0;  // of the round in progress: its Op above kOpShift, its bytes below
  uint64_t published_ = 0;
};

}  // namespace zt::ucx
