// Point-to-point tagged transfers between the ranks of a job over UCX ucp: one context, one
// worker, one endpoint per peer (worker addresses exchanged through the rendezvous store).
// Algorithms post sends and receives with completion handlers (which may post more), then
// run() drives progress until everything posted has completed.
//
// Failure model: a peer whose endpoint reports an error (UCX peer error handling), a message of
// the wrong size, or no progress at all for `timeout` makes run() throw CommError naming the
// peer; the transport is then broken and refuses further work.
// Thread safety: none. After construction, only one thread (the comm thread) may use it.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "zt/communicator.h"

namespace zt::ucx {

struct TransportOptions {
  std::string tls;                   // UCX_TLS for this communicator; "" = UCX's choice
  std::string tls_where;             // where tls was set (file:line), for its errors
  bool peer_error_handling = false;  // UCP_ERR_HANDLING_MODE_PEER: fail fast on dead peers
};

// "rank A called <theirs> where rank B called <mine>: ranks issued different collectives (...)",
// the reason of a CommError on either path (ring, shared memory) when the ranks' ops differ.
std::string different_collectives(int their_rank, CommOp theirs, int my_rank, CommOp mine);

class Transport {
 public:
  using Handler = std::function<void()>;

  Transport(const CommContext& ctx, const TransportOptions& options);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }

  // Tags identify (op sequence with its kind, sender, step, chunk) so concurrent chunks never
  // mismatch.
  static uint64_t make_tag(uint32_t seq, int src, int step, int chunk);
  // An op's sequence for make_tag: its index in its communicator (20 bits, wrapping: one op of a
  // family is in flight at a time) and its kind; +1 is its second phase (all_reduce's gather).
  // A receive matches a message whatever its kind and then compares the kinds, so ranks that
  // issued different collectives fail at once, naming both, as they do on shared memory (with
  // the kind matched, a message of another kind waited unmatched until the timeout; with no
  // kind, an all_gather met by a reduce_scatter of one size returned wrong values).
  static uint32_t op_seq(uint32_t index, CommOp kind);
  // The step make_tag() put in `tag`.
  static int tag_step(uint64_t tag);
  static constexpr int kMaxChunksPerStep = 1 << 16;

  void post_send(int peer, const void* buf, size_t bytes, uint64_t tag, Handler on_done = {});
  void post_recv(int peer, void* buf, size_t bytes, uint64_t tag, Handler on_done = {});
  // How an op's ranks wait on each other, for a stall's error: pairwise (each rank waits for
  // ranks that sent first), or a chain (a ring, a chain broadcast: each rank waits for the one
  // before it, so every rank behind a stopped one stalls, naming its own neighbour).
  enum class Waits { kPairwise, kChain };
  // Progresses until every posted request and its handler completed. `what` names the op for
  // errors. Throws CommError (and marks the transport broken) on failure or stall. `ring`, for
  // a ring whose step-s receive carries data that set out from the member s + 1 places before
  // this one (all-gather, reduce-scatter): the transport rank of each member, so that a stall
  // can name the member that most likely stopped, not only the neighbour waited on.
  void run(const std::string& what, Waits waits = Waits::kPairwise,
           const std::vector<int>* ring = nullptr);

  // Read from any thread (a communicator's destructor asks on the caller's): the flag is
  // atomic, and the reason is written once, before the flag is set.
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  // Marks the transport unusable (e.g. a shared-memory collective failed) so later ops and the
  // destructor treat it like a transport failure. The first reason stays. Comm thread only.
  void mark_broken(const std::string& reason);
  ucp_context_h context() const { return context_; }
  ucp_ep_h endpoint(int peer) const { return endpoints_[peer]; }
  // "" until broken() is true.
  std::string broken_reason() const { return broken() ? broken_reason_ : std::string(); }
  uint64_t wire_bytes_sent() const { return wire_bytes_sent_.load(); }

 private:
  struct Pending {
    Transport* owner = nullptr;
    void* request = nullptr;  // UCX request while in flight
    int peer = -1;
    bool is_recv = false;
    uint64_t tag = 0;         // a receive's own tag: its step, the kind of op it expects
    uint64_t sender_tag = 0;  // the tag of the message a receive took
    size_t bytes = 0;
    ucs_status_t status = UCS_OK;
    size_t received = 0;
    bool finished = false;  // its callback ran (a receive's may run inside ucp_tag_recv_nbx)
    Handler on_done;
  };
  struct PeerError {
    Transport* owner;
    int peer;
  };

  Pending* new_pending(int peer, bool is_recv, size_t bytes, Handler on_done);
  void track(Pending* p, ucs_status_ptr_t status);
  [[noreturn]] void fail(const std::string& message);
  // Cancels every request still in flight and progresses until they end, up to `bound`.
  void cancel_outstanding(std::chrono::milliseconds bound = std::chrono::milliseconds(500));

  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data);
  static void on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  int rank_;
  int world_;
  std::chrono::milliseconds timeout_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> endpoints_;
  std::vector<PeerError> peer_error_args_;
  std::vector<std::string> peer_failures_;  // per peer: empty, or what UCX reported

  std::deque<Pending> pool_;  // stable addresses for in-flight requests
  std::vector<Pending*> free_;
  std::vector<Pending*> completed_;  // filled by callbacks during progress
  size_t outstanding_ = 0;
  std::string broken_reason_;  // written once, before broken_ is set
  std::atomic<bool> broken_{false};
  std::atomic<uint64_t> wire_bytes_sent_{0};
};

}  // namespace zt::ucx
