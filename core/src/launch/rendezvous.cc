#include "zt/host/rendezvous.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "launch/loopback_listener.h"
#include "launch/store_probe.h"
#include "util/torch_compat.h"
#include "zt/error.h"
#include "zt/host/file_io_deadline.h"

namespace zt {

namespace {

// zt::Store over c10d's. Timeouts are per call, as the Store interface promises: c10d's own
// bounds its wait only, and its set, get and add read their reply with no timeout (a host
// that vanished without closing the connection blocked a rank in recv past SIGTERM, measured),
// so each call runs under a CallDeadline of `limit` (launch.timeout_s).
class TcpStore final : public Store {
 public:
  TcpStore(c10::intrusive_ptr<c10d::TCPStore> store, std::string where,
           std::chrono::milliseconds limit)
      : store_(std::move(store)), where_(std::move(where)), limit_(limit) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    const CallDeadline bound = deadline("set", key, limit_);
    answered(key, [&] { store_->set(key, value); });
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    const CallDeadline bound = deadline("get", key, timeout + limit_);
    const auto start = std::chrono::steady_clock::now();
    try {
      store_->wait({key}, timeout);
    } catch (const std::exception& e) {
      // Before the timeout the wait ended because the connection did: the store's host left.
      if (std::chrono::steady_clock::now() - start < timeout) {
        throw CommError("rendezvous store at " + where_ + ": lost it while waiting for key '" +
                        key + "' (" + first_line(e.what()) +
                        "); its host (rank 0, or under torchrun its agent) ended or died: see "
                        "rank 0's output");
      }
      throw CommError("rendezvous store: key '" + key + "' did not appear within " +
                      std::to_string(timeout.count()) + " ms (" + first_line(e.what()) +
                      "); a rank did not arrive or died");
    }
    return answered(key, [&] { return store_->get(key); });
  }
  int64_t add(const std::string& key, int64_t delta) override {
    const CallDeadline bound = deadline("add", key, limit_);
    return answered(key, [&] { return store_->add(key, delta); });
  }

  static std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

 private:
  // `call`'s result. A store that stops answering is a peer's failure, not zt's: rank 0 hosts
  // it, and its exit (after an error of its own) closes it under every other rank.
  template <typename Call>
  static auto answered(const std::string& key, Call&& call) -> decltype(call()) {
    try {
      return call();
    } catch (const std::exception& e) {
      throw CommError("rendezvous store: lost it while using key '" + key + "' (" +
                      first_line(e.what()) +
                      "); rank 0, which hosts it, ended or died: see its output");
    }
  }

  CallDeadline deadline(const char* call, const std::string& key,
                        std::chrono::milliseconds limit) const {
    return CallDeadline(
        "the rendezvous store's " + std::string(call) + " of key '" + key + "' at " + where_, limit,
        "the store's host (rank 0's, or under torchrun its agent's) stopped answering without "
        "closing the connection (powered off, or cut from the network?), or this process was "
        "stopped (SIGSTOP, a suspended job) past the limit",
        "check that host and the network to it (launch.timeout_s bounds this "
        "wait)");
  }

  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::string where_;
  std::chrono::milliseconds limit_;
};

// torchrun's agent hosts a TCPStore at MASTER_ADDR:MASTER_PORT and tells its workers so
// (TORCHELASTIC_USE_AGENT_STORE=True), as PyTorch's env:// init expects: every rank is then a
// client, and zt's keys live under a prefix of their own per restart of the job (the agent's
// store outlives its workers, so a restarted job must not count the last one's arrivals).
// Only under torchrun: a rank zt's launcher started (ZT_LAUNCHER) with the variable inherited
// from a torchrun worker above it (`trainer tune` run inside one) hosts its job's own store.
std::string agent_store_prefix() {
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (!agent || std::string(agent) != "True" || std::getenv("ZT_LAUNCHER")) return "";
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return "zt/torchelastic-" + std::string(restart ? restart : "0") + "/";
}

bool mentions(const std::string& text, const char* what) {
  return text.find(what) != std::string::npos;
}

// Counts this rank in at `key`; when `wait`, polls until all `world` ranks have, up to
// `timeout`. Returns the count seen last (below `world` when time ran out).
int64_t count_in(Store& store, const std::string& key, int world, bool wait,
                 std::chrono::milliseconds timeout) {
  int64_t count = store.add(key, 1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (wait && count < world && std::chrono::steady_clock::now() <= deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    count = store.add(key, 0);
  }
  return count;
}

// Every rank of a job whose rendezvous address is loopback runs on this host: nothing else
// needs to reach its store. A kernel that refuses costs the job nothing but this protection.
void keep_store_on_this_host(int port) {
  try {
    if (tie_listeners_to_loopback(port) == 0) {
      std::fprintf(stderr,
                   "zt: warning: found no listening socket on port %d to keep to this "
                   "host; the rendezvous store may be reachable from other hosts\n",
                   port);
    }
  } catch (const CommError& e) {
    std::fprintf(stderr, "zt: warning: %s\n", e.what());
  }
}

}  // namespace

std::unique_ptr<Store> rendezvous(const std::string& addr, int port, int rank, int world,
                                  std::chrono::milliseconds timeout,
                                  const std::string& cluster_job) {
  std::string where = addr + ":" + std::to_string(port);
  const std::string prefix = agent_store_prefix();
  const bool hosts = rank == 0 && prefix.empty();
  const std::string unreachable = "rendezvous: rank " + std::to_string(rank) +
                                  " cannot reach rank 0 at " + where + " within " +
                                  std::to_string(timeout.count()) + " ms (";
  const std::string check = "); check that rank 0 was started and MASTER_ADDR/MASTER_PORT agree";
  // A client connects once the store listens (launch/store_probe.h says why).
  if (!hosts) {
    const std::string why = wait_until_accepting(addr, port,
                                                 std::chrono::steady_clock::now() + timeout);
    if (!why.empty()) throw CommError(unreachable + why + check);
  }
  c10::intrusive_ptr<c10d::TCPStore> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(
        addr, compat::tcp_store_options(port, hosts, world, timeout));
  } catch (const std::exception& e) {
    std::string why = TcpStore::first_line(e.what());
    const std::string pick = "MASTER_PORT or --set launch.master_port=N";
    if (hosts && (mentions(why, "Permission denied") || mentions(why, "EACCES"))) {
      throw CommError("rendezvous: rank 0 may not listen on " + where + " (" + why +
                      "): ports below 1024 need privileges; pick one above with " + pick);
    }
    if (hosts &&
        (mentions(why, "in use") || mentions(why, "EADDRINUSE") || mentions(why, "bind"))) {
      throw CommError("rendezvous: rank 0 cannot listen on " + where + ": port in use (" + why +
                      "); free it or pick another with " + pick +
                      " (0 picks a free one for local launches)");
    }
    if (hosts) {
      // The store listens on every interface; its own client then failed to reach the address
      // the job gave, which is not this host's ("rank 0 cannot reach rank 0" said nothing).
      char name[256] = {};
      ::gethostname(name, sizeof(name) - 1);
      throw CommError("rendezvous: rank 0 hosts the store but cannot reach it at " + where + " (" +
                      why + "): MASTER_ADDR must name rank 0's own host (this is " + name + ")");
    }
    throw CommError(unreachable + why + check);
  }
  if (hosts && is_loopback_host(addr)) keep_store_on_this_host(tcp->getPort());
  std::unique_ptr<Store> store = std::make_unique<TcpStore>(tcp, where, timeout);
  const std::string job_prefix = prefix + (cluster_job.empty() ? "" : "zt/" + cluster_job + "/");
  if (!job_prefix.empty()) store = prefixed_store(std::move(store), job_prefix);
  // Arrival barrier: every rank counts itself in, then waits for the total.
  const int64_t arrived = count_in(*store, "zt/arrived", world, true, timeout);
  if (arrived > world) {
    // More ranks than the job has counted in here: this store is another job's that the
    // cluster's job ids cannot tell apart (a fixed master_port shared outside Slurm and mpirun),
    // or an earlier attempt's. Joining it mixed the jobs.
    throw CommError("rendezvous at " + where + ": " + std::to_string(arrived) +
                    " ranks counted in for a job of " + std::to_string(world) +
                    ": the store there is another job's or an earlier attempt's; pick another "
                    "port (MASTER_PORT, or --set launch.master_port=N)");
  }
  if (arrived < world) {
    throw CommError("rendezvous at " + where + " timed out after " +
                    std::to_string(timeout.count()) + " ms: " + std::to_string(arrived) + " of " +
                    std::to_string(world) +
                    " ranks arrived; check that every rank "
                    "was started with the same MASTER_ADDR/MASTER_PORT and WORLD_SIZE");
  }
  // Release: rank 0 hosts the store, so it leaves only once every other rank has seen the
  // total. A rank 0 that fails at once (bad input) would otherwise close the store under a peer
  // still polling the count, whose error could then be taken for the first failure.
  const int64_t released = count_in(*store, "zt/released", world, hosts, timeout);
  if (hosts && released < world) {
    throw CommError("rendezvous at " + where + ": only " + std::to_string(released) + " of " +
                    std::to_string(world) + " ranks saw every rank arrive within " +
                    std::to_string(timeout.count()) +
                    " ms; a rank died right after arriving (see its output)");
  }
  return store;
}

void depart(Store& store, int rank, int world, std::chrono::milliseconds timeout) {
  const int64_t departed = count_in(store, "zt/departed", world, rank == 0, timeout);
  if (rank == 0 && departed < world) {
    throw CommError("job end: only " + std::to_string(departed) + " of " + std::to_string(world) +
                    " ranks finished within " + std::to_string(timeout.count()) +
                    " ms; the others are still running or died (see their output)");
  }
}

}  // namespace zt
