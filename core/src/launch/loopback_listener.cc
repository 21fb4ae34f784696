#include "launch/loopback_listener.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "zt/error.h"

namespace zt {

namespace {

bool is_loopback(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->sa_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr);
  }
  return false;
}

// The port of a listening TCP socket, or -1 for any other descriptor.
int listening_port(int fd) {
  int listening = 0;
  socklen_t size = sizeof(listening);
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0 || !listening) return -1;
  sockaddr_storage local{};
  socklen_t local_size = sizeof(local);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0) return -1;
  if (local.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  if (local.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
  return -1;
}

}  // namespace

bool is_loopback_host(const std::string& given) {
  // The names every distribution's /etc/hosts gives loopback (Debian's ip6-*, Red Hat's
  // localhost.localdomain).
  for (const char* name : {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}) {
    if (::strcasecmp(given.c_str(), name) == 0) return true;
  }
  // An IPv6 literal as a URL writes it ("[::1]").
  const std::string host = given.size() > 2 && given.front() == '[' && given.back() == ']'
                               ? given.substr(1, given.size() - 2)
                               : given;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;  // a literal address only: names are resolved per host
  addrinfo* found = nullptr;
  if (host.empty() || ::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool all = found != nullptr;
  for (const addrinfo* a = found; a; a = a->ai_next) all = all && is_loopback(a->ai_addr);
  ::freeaddrinfo(found);
  return all;
}

int tie_listeners_to_loopback(int port) {
  DIR* fds = ::opendir("/proc/self/fd");
  if (!fds) {
    throw CommError("cannot list /proc/self/fd to find the rendezvous store's socket: " +
                    std::string(std::strerror(errno)) + "; mount /proc");
  }
  int tied = 0, refused = 0, error = 0;
  while (const dirent* entry = ::readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || fd == ::dirfd(fds) || listening_port(static_cast<int>(fd)) != port) {
      continue;
    }
    static const char kDevice[] = "lo";
    if (::setsockopt(static_cast<int>(fd), SOL_SOCKET, SO_BINDTODEVICE, kDevice,
                     sizeof(kDevice) - 1) == 0) {
      ++tied;
    } else {
      ++refused;
      error = errno;
    }
  }
  ::closedir(fds);
  if (refused > 0) {
    throw CommError("cannot tie the rendezvous store's listening socket (port " +
                    std::to_string(port) + ") to the loopback device: " + std::strerror(error) +
                    "; it stays reachable from other hosts (Linux before 5.7 needs CAP_NET_RAW "
                    "for this), so keep launch.master_port behind a firewall");
  }
  return tied;
}

}  // namespace zt
