// Every difference between the LibTorch versions zt builds against (Debian's 1.13 and the one
// inside PyTorch 2.x) is guarded here, and only here.
#pragma once

#include <torch/version.h>

#include <optional>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace zt::compat {

inline c10d::TCPStoreOptions tcp_store_options(int port, bool is_server, int world,
                                               std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = is_server;
  opts.numWorkers = static_cast<std::size_t>(world);
  // We count arrivals ourselves so a timeout can say how many ranks came.
  opts.waitWorkers = false;
  opts.timeout = timeout;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  // The libuv backend (added in 2.2, default since 2.4) reports bind failures differently; the
  // classic backend behaves as in 1.13, which our error translation expects.
  opts.useLibUV = false;
#endif
  return opts;
}

}  // namespace zt::compat
