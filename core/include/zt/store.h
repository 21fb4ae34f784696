// A key-value store shared by all ranks of a job: how plugins exchange addresses and unique ids
// at start-up. zt's implementation wraps LibTorch's c10d::TCPStore hosted by rank 0.
// Thread safety: all methods may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "zt/api.h"

namespace zt {

class ZT_API Store {
 public:
  virtual ~Store();
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Blocks until `key` exists, up to `timeout`; throws CommError naming the key when it does not
  // appear in time (a rank that never arrived).
  virtual std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds `delta` to the integer at `key` (created as 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
};

}  // namespace zt
