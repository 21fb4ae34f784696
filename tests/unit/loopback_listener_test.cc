// launch/loopback_listener.h: which rendezvous addresses are loopback, and tying this process's
// listening sockets on a port to the loopback device; rendezvous() does it for a one-host job's
// store, and leaves a store on any other address alone. (That another host is refused is checked
// across two network namespaces by tests/multiproc/loopback_store_test.sh.) And
// launch/store_probe.h: a rank that connects waits for the store to listen.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "../skip.h"
#include "../test_util.h"
#include "launch/loopback_listener.h"
#include "launch/store_probe.h"
#include "zt/host/launcher.h"
#include "zt/host/rendezvous.h"

namespace {

// A TCP socket of this test on every interface, as LibTorch's store binds, listening when
// `listen` says so.
struct TestSocket {
  int fd = -1;
  int port = 0;
  explicit TestSocket(bool listen) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    socklen_t size = sizeof(addr);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) == 0);
    port = ntohs(addr.sin_port);
    if (listen) REQUIRE(::listen(fd, 4) == 0);
  }
  ~TestSocket() { ::close(fd); }
  std::string device() const {
    char name[32] = {};
    socklen_t size = sizeof(name);
    REQUIRE(::getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, name, &size) == 0);
    return std::string(name, strnlen(name, size));
  }
};

// What `ss` says listens on `port`.
std::string ss_listener(int port) {
  return zt::test::run_command("ss -ltnH 'sport = :" + std::to_string(port) + "'").output;
}

}  // namespace

TEST_CASE("loopback hosts: 127.0.0.0/8, ::1 and the names every /etc/hosts gives loopback are "
          "loopback, other addresses and names are not") {
  CHECK(zt::is_loopback_host("127.0.0.1"));
  CHECK(zt::is_loopback_host("127.8.9.10"));
  CHECK(zt::is_loopback_host("::1"));
  CHECK(zt::is_loopback_host("localhost"));
  CHECK(zt::is_loopback_host("[::1]"));
  CHECK(zt::is_loopback_host("localhost.localdomain"));
  CHECK(zt::is_loopback_host("ip6-localhost"));
  CHECK(zt::is_loopback_host("ip6-loopback"));
  CHECK_FALSE(zt::is_loopback_host("localhost2"));
  CHECK_FALSE(zt::is_loopback_host("[10.231.0.1]"));
  CHECK_FALSE(zt::is_loopback_host("0.0.0.0"));
  CHECK_FALSE(zt::is_loopback_host("10.231.0.1"));
  CHECK_FALSE(zt::is_loopback_host("::"));
  CHECK_FALSE(zt::is_loopback_host(""));
  CHECK_FALSE(zt::is_loopback_host("no-such-host.invalid"));
  // A name other than localhost is not, even one that resolves to loopback here: this machine's
  // own name does on Debian (127.0.1.1), and another host reaches it by that name elsewhere.
  char name[256] = {};
  REQUIRE(::gethostname(name, sizeof(name) - 1) == 0);
  if (std::string(name) != "localhost") CHECK_FALSE(zt::is_loopback_host(name));
  CHECK(zt::is_loopback_host("LocalHost"));
}

TEST_CASE("tying listeners to loopback: the listener on the port, not other ports or sockets") {
  TestSocket listener(true), other(true), unlistened(false);
  CHECK(listener.device().empty());
  CHECK(zt::tie_listeners_to_loopback(listener.port) == 1);
  CHECK(listener.device() == "lo");
  CHECK(other.device().empty());
  CHECK(zt::tie_listeners_to_loopback(unlistened.port) == 0);  // bound, but not listening
  CHECK(unlistened.device().empty());
}

TEST_CASE("rendezvous keeps a one-host job's store on loopback, and any other store as it was") {
  if (::access("/usr/bin/ss", X_OK) != 0 && ::access("/bin/ss", X_OK) != 0) {
    ZT_SKIP_UNLESS_CI("`ss` (iproute2, which scripts/setup.sh installs) is missing");
  }
  const auto timeout = std::chrono::milliseconds(10000);
  {
    const int port = zt::pick_free_port("127.0.0.1");
    auto store = zt::rendezvous("127.0.0.1", port, 0, 1, timeout);
    const std::string listener = ss_listener(port);
    INFO("ss: " << listener);
    CHECK(listener.find("%lo:" + std::to_string(port)) != std::string::npos);
  }
  {
    const int port = zt::pick_free_port("0.0.0.0");
    auto store = zt::rendezvous("0.0.0.0", port, 0, 1, timeout);
    const std::string listener = ss_listener(port);
    INFO("ss: " << listener);
    CHECK(listener.find(":" + std::to_string(port)) != std::string::npos);
    CHECK(listener.find("%lo") == std::string::npos);
  }
}

TEST_CASE("a rank waits for rank 0's store: refused until it listens, accepted once it does") {
  using namespace std::chrono_literals;
  TestSocket store(false);  // bound, so the port stays this test's, but refusing until it listens
  const auto soon = [] { return std::chrono::steady_clock::now() + 200ms; };
  CHECK(zt::wait_until_accepting("127.0.0.1", store.port, soon()) ==
        "nothing accepted a connection there");
  // A name that never resolves (RFC 2606's .invalid) says so, not that nothing accepted.
  const std::string unresolved = zt::wait_until_accepting("rank0.invalid", store.port, soon());
  CHECK(unresolved.rfind("the name rank0.invalid does not resolve: ", 0) == 0);
  std::thread listens_later([&] {
    std::this_thread::sleep_for(300ms);
    ::listen(store.fd, 4);
  });
  CHECK(zt::wait_until_accepting("127.0.0.1", store.port, std::chrono::steady_clock::now() + 30s)
            .empty());
  listens_later.join();
  // A name that resolves to ::1 and 127.0.0.1: the IPv4 listener accepts, the other is refused.
  CHECK(zt::wait_until_accepting("localhost", store.port, soon()).empty());
}

TEST_CASE("a rank zt's launcher started hosts its store even with torchrun's agent-store "
          "variable inherited from a torchrun worker above it") {
  zt::test::EnvVar agent("TORCHELASTIC_USE_AGENT_STORE", "True");
  zt::test::EnvVar launcher("ZT_LAUNCHER", "1");
  const int port = zt::pick_free_port("127.0.0.1");
  std::unique_ptr<zt::Store> store;
  CHECK_NOTHROW(store = zt::rendezvous("127.0.0.1", port, 0, 1, std::chrono::seconds(5)));
  REQUIRE(store);
  CHECK(store->add("k", 2) == 2);
}

TEST_CASE("a picked store port lies below the ephemeral range, where no outgoing connection can "
          "take it before rank 0 listens") {
  int lowest_ephemeral = 32768, highest_ephemeral = 60999;
  {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    range >> lowest_ephemeral >> highest_ephemeral;
  }
  if (lowest_ephemeral < 11000) {
    ZT_SKIP("this host's ephemeral port range starts at " + std::to_string(lowest_ephemeral) +
            ": too low for a range below it, so bind(0)'s port is used");
  }
  for (int i = 0; i < 20; ++i) {
    const int port = zt::pick_free_port("127.0.0.1");
    CHECK(port >= 10000);
    CHECK(port < lowest_ephemeral);
  }
}
