// A key-value store shared by all ranks of a job: how plugins exchange addresses and unique ids
// at start-up (CommContext::store). zt's implementation wraps LibTorch's c10d::TCPStore hosted
// by rank 0. Keys are global to the job: prefix yours (CommContext::store_prefix) so two
// communicators, or two plugins, never collide. Values are opaque bytes.
// Thread safety: all methods may be called concurrently, from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zt/api.h"

namespace zt {

class ZT_API Store {
 public:
  virtual ~Store();
  // Sets (or overwrites) `key`; visible to every rank once it returns.
  //   key: in. value: in, any bytes.
  // Throws when the store is unreachable (rank 0 gone): zt's implementation lets c10d's own
  // exception through (a std::exception, not a zt::Error).
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Blocks until `key` exists, up to `timeout`, then returns its value.
  //   key: in. timeout: in, the longest wait (pass CommContext::timeout).
  // Throws CommError naming the key when it does not appear in time (a rank that never arrived
  // or died).
  virtual std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds `delta` to the integer at `key` (created as 0) and returns the new value;
  // the usual way to count arrivals or hand out ids. Throws as set().
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
};

// `store` seen with `prefix` before every key: parties that share one store keep apart (the ranks
// of a restart of a torchrun job on its agent's store; a process's successive Python engines).
ZT_API std::unique_ptr<Store> prefixed_store(std::shared_ptr<Store> store, std::string prefix);

}  // namespace zt
