// Every difference between the LibTorch versions zt builds against (Debian's 1.13 and the one
// inside PyTorch 2.x) is guarded here, and only here.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/version.h>

#include <optional>
#include <sstream>
#include <string>
#include <type_traits>

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

// The key under which a torch::optim optimizer keeps a parameter's state: LibTorch 1.13 spells
// the parameter's TensorImpl address as a string, 2.x keys by the address itself. `StateMap` is
// the optimizer's state() map type, so callers never name either spelling.
template <typename StateMap>
typename StateMap::key_type optimizer_state_key(const at::Tensor& param) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;  // what 1.13's c10::guts::to_string writes
    address << param.unsafeGetTensorImpl();
    return address.str();
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

}  // namespace zt::compat
