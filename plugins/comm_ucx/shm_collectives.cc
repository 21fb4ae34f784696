#include "shm_collectives.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "zt/error.h"

namespace zt::ucx {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

void ShmCollectives::publish(ShmFlag ShmControl::*flag) {
  (w_.control(rank_).*flag).value.store(epoch_, std::memory_order_release);
}

void ShmCollectives::wait_for(ShmFlag ShmControl::*flag, uint64_t epoch, const char* phase,
                              const std::string& what, int only_rank) {
  auto start = std::chrono::steady_clock::now();
  for (int p = 0; p < world_; ++p) {
    if (only_rank >= 0 && p != only_rank) continue;
    std::atomic<uint64_t>& value = (w_.control(p).*flag).value;
    for (uint32_t spins = 0; value.load(std::memory_order_acquire) < epoch; ++spins) {
      cpu_relax();
      if ((spins & 0xFF) != 0xFF) continue;
      // More ranks than cores (tests) must not starve the rank we wait for.
      sched_yield();
      if (std::chrono::steady_clock::now() - start > timeout_) {
        throw CommError("comm_ucx: " + what + ": no progress for " +
                        std::to_string(timeout_.count()) + " ms while waiting for rank " +
                        std::to_string(p) + " (shared-memory round " + std::to_string(epoch) +
                        ", phase '" + phase +
                        "'); it died, stalled, or called a different "
                        "collective (raise launch.timeout_s if it is just slow)");
      }
    }
  }
}

void ShmCollectives::begin_round(const std::string& what) {
  // Nobody may still be reading our segment from the previous round.
  wait_for(&ShmControl::done, epoch_, "finish reading", what);
  ++epoch_;
}

void ShmCollectives::end_round() { publish(&ShmControl::done); }

void ShmCollectives::all_gather(const std::string& what, uint8_t* out, size_t block_bytes) {
  const size_t cap = w_.capacity();
  for (size_t off = 0; off < block_bytes; off += cap) {
    const size_t len = std::min(cap, block_bytes - off);
    begin_round(what);
    std::memcpy(w_.in(rank_), out + rank_ * block_bytes + off, len);
    published_ += len;
    publish(&ShmControl::in_ready);
    wait_for(&ShmControl::in_ready, epoch_, "input ready", what);
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
    begin_round(what);
    // Publish this rank's contribution to every other rank's block, in slot p of `in`.
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      std::memcpy(w_.in(rank_) + p * per_block * es, src + (p * block_elems + first) * es, len);
      published_ += len;
    }
    publish(&ShmControl::in_ready);
    wait_for(&ShmControl::in_ready, epoch_, "input ready", what);
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
    begin_round(what);
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      std::memcpy(w_.in(rank_) + p * per_block * es, t + (p * block_elems + first) * es, len);
      published_ += len;
    }
    publish(&ShmControl::in_ready);
    wait_for(&ShmControl::in_ready, epoch_, "input ready", what);
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
    begin_round(what);
    if (rank_ == root) {
      std::memcpy(w_.in(rank_), buf + off, len);
      published_ += len;
      publish(&ShmControl::in_ready);
    } else {
      wait_for(&ShmControl::in_ready, epoch_, "input ready", what, root);
      std::memcpy(buf + off, w_.in(root), len);
    }
    end_round();
  }
}

void ShmCollectives::barrier(const std::string& what) {
  begin_round(what);
  publish(&ShmControl::in_ready);
  wait_for(&ShmControl::in_ready, epoch_, "barrier", what);
  end_round();
}

}  // namespace zt::ucx
