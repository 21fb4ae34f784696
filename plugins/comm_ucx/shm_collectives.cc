#include "shm_collectives.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "zt/error.h"

namespace zt::ucx {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long a wait spins before it sleeps: a peer in the same phase publishes within a few
// microseconds, and a futex sleep costs about as much as that to enter and leave. Past it, the
// peer is computing, and the core is worth more to compute than to the spinner.
constexpr auto kSpin = std::chrono::microseconds(20);
// A sleep's bound, after which the waiter looks at the flag and the clock again: a lost wake-up
// or a dead publisher costs at most this, never a hang.
constexpr long kSleepNs = 10 * 1000 * 1000;
// A round's published word: its collective above this bit, its bytes per rank below.
constexpr int kOpShift = 56;
constexpr uint64_t kBytesMask = (uint64_t{1} << kOpShift) - 1;

// The futexes are not FUTEX_PRIVATE: the words sit in memory shared between processes.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  const timespec bound{0, kSleepNs};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &bound, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps until `flag` may have reached `epoch` (or kSleepNs passed). A sleeper counts itself in
// before it reads the flag, and the publisher reads the count after it writes the flag (both
// sequentially consistent), so either the sleeper sees the new value or the publisher sees the
// sleeper and wakes it; FUTEX_WAIT's own check of wake_word covers a wake that comes first.
void sleep_on(ShmFlag& flag, uint64_t epoch) {
  flag.sleepers.fetch_add(1);
  const uint32_t seen = flag.wake_word.load();
  if (flag.value.load() < epoch) futex_wait(flag.wake_word, seen);
  flag.sleepers.fetch_sub(1);
}

}  // namespace

void ShmCollectives::publish(ShmFlag ShmControl::*flag) {
  ShmFlag& f = w_.control(rank_).*flag;
  f.value.store(epoch_);
  f.wake_word.store(static_cast<uint32_t>(epoch_));
  if (f.sleepers.load() > 0) futex_wake_all(f.wake_word);
}

void ShmCollectives::wait_for(ShmFlag ShmControl::*flag, uint64_t epoch, const char* phase,
                              const std::string& what, int only_rank) {
  const auto start = std::chrono::steady_clock::now();
  for (int p = 0; p < world_; ++p) {
    if (only_rank >= 0 && p != only_rank) continue;
    ShmFlag& f = w_.control(p).*flag;
    for (uint32_t spins = 0; f.value.load(std::memory_order_acquire) < epoch; ++spins) {
      if ((spins & 0x3F) != 0x3F) {
        cpu_relax();
        continue;
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited > timeout_) {
        throw CommError("comm_ucx: " + what + ": no progress for " +
                        std::to_string(timeout_.count()) + " ms while waiting for rank " +
                        std::to_string(job_ranks_[p]) + " (shared-memory round " +
                        std::to_string(epoch) + ", phase '" + phase +
                        "'); it died, stalled, or called a different "
                        "collective (raise launch.timeout_s if it is just slow)");
      }
      if (waited > kSpin) sleep_on(f, epoch);
    }
  }
}

void ShmCollectives::begin_round(const std::string& what, CommOp op, uint64_t op_bytes) {
  // Nobody may still be reading our segment from the previous round.
  wait_for(&ShmControl::done, epoch_, "finish reading", what);
  ++epoch_;
  // Published with this round's `in_ready` (its store orders this one before it).
  op_bytes_ = (static_cast<uint64_t>(op) << kOpShift) | op_bytes;
  w_.control(rank_).op_bytes.store(op_bytes_, std::memory_order_relaxed);
}

void ShmCollectives::check_same_size(const std::string& what, int only_rank) {
  for (int p = 0; p < world_; ++p) {
    if (p == rank_ || (only_rank >= 0 && p != only_rank)) continue;
    // Stable: p wrote it before this round's `in_ready`, and cannot begin the next round until
    // this rank reports `done`.
    const uint64_t theirs = w_.control(p).op_bytes.load(std::memory_order_acquire);
    if (theirs >> kOpShift != op_bytes_ >> kOpShift) {
      throw CommError("comm_ucx: " + what + ": " +
                      different_collectives(job_ranks_[p], static_cast<CommOp>(theirs >> kOpShift),
                                            job_ranks_[rank_],
                                            static_cast<CommOp>(op_bytes_ >> kOpShift)));
    }
    if (theirs != op_bytes_) {
      throw CommError("comm_ucx: " + what + ": rank " + std::to_string(job_ranks_[p]) +
                      " called it with " + std::to_string(theirs & kBytesMask) +
                      " bytes per rank where rank " + std::to_string(job_ranks_[rank_]) + " has " +
                      std::to_string(op_bytes_ & kBytesMask) +
                      ": ranks called it with different sizes (a bug in the caller: every rank "
                      "must issue the same collectives with the same sizes, in the same order)");
    }
  }
}

void ShmCollectives::end_round() { publish(&ShmControl::done); }

void ShmCollectives::all_gather(const std::string& what, uint8_t* out, size_t block_bytes) {
  const size_t cap = w_.capacity();
  for (size_t off = 0; off < block_bytes; off += cap) {
    const size_t len = std::min(cap, block_bytes - off);
    begin_round(what, CommOp::kAllGather, block_bytes);
    std::memcpy(w_.in(rank_), out + rank_ * block_bytes + off, len);
    published_ += len;
    publish(&ShmControl::in_ready);
    wait_for(&ShmControl::in_ready, epoch_, "input ready", what);
    check_same_size(what);
    for (int p = 0; p < world_; ++p) {
      if (p != rank_) std::memcpy(out + p * block_bytes + off, w_.in(p), len);
    }
    end_round();
  }
}

void ShmCollectives::reduce_scatter(const std::string& what, const void* in, void* out,
                                    size_t block_elems, ElemType type, ReduceOp reduce) {
  const size_t es = elem_size(type);
  const size_t per_block = std::max<size_t>(1, w_.capacity() / (world_ * es));
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  for (size_t first = 0; first < block_elems; first += per_block) {
    const size_t count = std::min(per_block, block_elems - first), len = count * es;
    begin_round(what, CommOp::kReduceScatter, block_elems * es);
    // Publish this rank's contribution to every other rank's block, in slot p of `in`.
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      std::memcpy(w_.in(rank_) + p * per_block * es, src + (p * block_elems + first) * es, len);
      published_ += len;
    }
    publish(&ShmControl::in_ready);
    wait_for(&ShmControl::in_ready, epoch_, "input ready", what);
    check_same_size(what);
    // Own block: this rank's contribution straight from `in`, peers' from their segments.
    const uint8_t* acc = src + (rank_ * block_elems + first) * es;
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      reduce_elements(dst + first * es, acc, w_.in(p) + rank_ * per_block * es, count, type,
                      reduce);
      acc = dst + first * es;
    }
    end_round();
  }
}

void ShmCollectives::all_reduce(const std::string& what, void* data, size_t block_elems,
                                ElemType type, ReduceOp reduce) {
  const size_t es = elem_size(type);
  const size_t per_block = std::max<size_t>(1, w_.capacity() / (world_ * es));
  auto* t = static_cast<uint8_t*>(data);
  for (size_t first = 0; first < block_elems; first += per_block) {
    const size_t count = std::min(per_block, block_elems - first), len = count * es;
    begin_round(what, CommOp::kAllReduce, block_elems * es);
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      std::memcpy(w_.in(rank_) + p * per_block * es, t + (p * block_elems + first) * es, len);
      published_ += len;
    }
    publish(&ShmControl::in_ready);
    wait_for(&ShmControl::in_ready, epoch_, "input ready", what);
    check_same_size(what);
    // Reduce this rank's block into `out` of its segment, where every rank reads it.
    const uint8_t* acc = t + (rank_ * block_elems + first) * es;
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      reduce_elements(w_.out(rank_), acc, w_.in(p) + rank_ * per_block * es, count, type, reduce);
      acc = w_.out(rank_);
    }
    published_ += len;
    publish(&ShmControl::out_ready);
    wait_for(&ShmControl::out_ready, epoch_, "output ready", what);
    for (int p = 0; p < world_; ++p) {
      std::memcpy(t + (p * block_elems + first) * es, w_.out(p), len);
    }
    end_round();
  }
}

void ShmCollectives::broadcast(const std::string& what, uint8_t* buf, size_t bytes, int root) {
  const size_t cap = w_.capacity();
  for (size_t off = 0; off < bytes; off += cap) {
    const size_t len = std::min(cap, bytes - off);
    begin_round(what, CommOp::kBroadcast, bytes);
    if (rank_ == root) {
      std::memcpy(w_.in(rank_), buf + off, len);
      published_ += len;
      publish(&ShmControl::in_ready);
    } else {
      wait_for(&ShmControl::in_ready, epoch_, "input ready", what, root);
      check_same_size(what, root);
      std::memcpy(buf + off, w_.in(root), len);
    }
    end_round();
  }
}

void ShmCollectives::barrier(const std::string& what) {
  begin_round(what, CommOp::kBarrier, 0);
  publish(&ShmControl::in_ready);
  wait_for(&ShmControl::in_ready, epoch_, "barrier", what);
  check_same_size(what);
  end_round();
}

}  // namespace zt::ucx
