// A window of shared memory between the ranks of one host, allocated and mapped by UCX: each
// rank's segment comes from ucp_mem_map(ALLOCATE) (a posix/sysv shared-memory transport) and
// peers reach it through ucp_rkey_ptr, so collectives can move data with plain loads and
// stores instead of a kernel copy per message (CMA measured ~4x slower here than memcpy).
// Each segment holds a control block (phase flags) and two data areas, `in` and `out`.
// Creation is collective: either every rank maps every peer, or nobody uses the window.
// Thread safety: none; the comm thread owns it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ring.h"
#include "ucx_transport.h"

namespace zt::ucx {

// One 64-byte line per flag so ranks polling different flags do not share a cache line.
// `value` is what waiters read; `wake_word` (its low 32 bits) and `sleepers` let a waiter that
// stopped spinning sleep in the kernel (a futex on `wake_word`, shared between processes) until
// the publisher wakes it: see ShmCollectives::wait_for.
struct alignas(64) ShmFlag {
  std::atomic<uint64_t> value{0};
  std::atomic<uint32_t> wake_word{0};
  std::atomic<uint32_t> sleepers{0};  // ranks blocked (or about to block) on wake_word
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain words");

struct ShmControl {
  ShmFlag in_ready;   // epoch whose `in` data is published
  ShmFlag out_ready;  // epoch whose `out` data is published
  ShmFlag done;       // epoch in which this rank finished reading peers' segments
  // The size of the op the round belongs to, written before `in_ready`: peers compare it with
  // their own, so ranks that called one collective with different sizes fail at once.
  alignas(64) std::atomic<uint64_t> op_bytes{0};
};

class ShmWindow {
 public:
  // Collective over the members of `group` (segments are published in `store` under `prefix`).
  // Returns null (on every member alike) when some member cannot map some other's segment, e.g.
  // members on different hosts. `capacity` is the size of each data area. Indices below are
  // member indices of `group`.
  static std::unique_ptr<ShmWindow> create(Transport& transport, const Group& group, Store& store,
                                           const std::string& prefix,
                                           std::chrono::milliseconds timeout, size_t capacity);
  ~ShmWindow();
  ShmWindow(const ShmWindow&) = delete;
  ShmWindow& operator=(const ShmWindow&) = delete;

  size_t capacity() const { return capacity_; }
  ShmControl& control(int rank) { return *reinterpret_cast<ShmControl*>(bases_[rank]); }
  uint8_t* in(int rank) { return bases_[rank] + kDataOffset; }
  uint8_t* out(int rank) { return bases_[rank] + kDataOffset + capacity_; }

 private:
  static constexpr size_t kDataOffset = 4096;
  ShmWindow(Transport& transport, size_t capacity) : transport_(transport), capacity_(capacity) {}

  Transport& transport_;
  size_t capacity_;
  ucp_mem_h memh_ = nullptr;
  std::vector<ucp_rkey_h> rkeys_;  // per peer; null for self
  std::vector<uint8_t*> bases_;    // per rank: where its segment is mapped in this process
};

}  // namespace zt::ucx
