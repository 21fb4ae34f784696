#include "launch/store_probe.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <thread>

namespace zt {

namespace {

using Clock = std::chrono::steady_clock;

// One non-blocking connect to `a`, waiting for its outcome until `deadline` (at most 1 s a try:
// a host that drops the SYN would otherwise hold the try for the kernel's whole retry span).
bool accepts(const addrinfo& a, Clock::time_point deadline) {
  const int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) return false;
  bool accepted = ::connect(fd, a.ai_addr, a.ai_addrlen) == 0;
  if (!accepted && errno == EINPROGRESS) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                            Clock::now());
    pollfd p{fd, POLLOUT, 0};
    const int wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1000));
    if (::poll(&p, 1, wait_ms) == 1) {
      int error = 0;
      socklen_t len = sizeof error;
      accepted = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
    }
  }
  ::close(fd);
  return accepted;
}

}  // namespace

std::string wait_until_accepting(const std::string& host, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string service = std::to_string(port);
  // Resolved once, not on every try: a name asks the resolver, which may be slow to answer.
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> found(nullptr, &::freeaddrinfo);
  std::string unresolved;
  while (true) {
    if (!found) {
      addrinfo* resolved = nullptr;
      const int error = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &resolved);
      if (error == 0) {
        found.reset(resolved);
      } else {
        unresolved = "the name " + host + " does not resolve: " + ::gai_strerror(error);
      }
    }
    for (const addrinfo* a = found.get(); a; a = a->ai_next)
      if (accepts(*a, deadline)) return "";
    if (Clock::now() >= deadline) return found ? "nothing accepted a connection there" : unresolved;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace zt
