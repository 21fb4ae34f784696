#include "ucx_transport.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "zt/error.h"
#include "zt/store.h"

namespace zt::ucx {

namespace {

void check(ucs_status_t status, const std::string& what) {
  if (status != UCS_OK) {
    throw CommError("comm_ucx: " + what + " failed: " + ucs_status_string(status) +
                    "; check the UCX installation and UCX_* environment variables "
                    "(ucx_info -d lists the transports)");
  }
}

// On a ring whose step-s receive carries data that set out s + 1 members before this one, the
// member behind a stall at the earliest pending step `step`, waiting on transport rank
// `waiting`: a member that stopped before its op stalls every other member, each at the step
// its data would have reached it. One that stopped midway forwarded part of it: then the
// culprit is at most this far back, so the text says "most likely". "" when `waiting` is not a
// member.
std::string stopped_member(const std::vector<int>& ring, int waiting, int step) {
  const int n = static_cast<int>(ring.size());
  const auto it = std::find(ring.begin(), ring.end(), waiting);
  if (it == ring.end() || n == 0) return "";
  const int left = static_cast<int>(it - ring.begin());
  const int stopped = ring[((left - step) % n + n) % n];
  if (stopped == waiting)
    return "counting back by the ring step, that rank itself most likely stopped";
  return "counting back by the ring step (" + std::to_string(step) +
         "), the rank that stopped is most likely rank " + std::to_string(stopped);
}

// A tag: [seq:24][src:12][step:12][chunk:16]; in seq, the op's kind sits above its phase bit.
constexpr int kSeqShift = 40;
constexpr int kKindInSeq = 1;
constexpr int kKindShift = kSeqShift + kKindInSeq;
constexpr uint64_t kKindBits = uint64_t{0x7} << kKindShift;

CommOp kind_of(uint64_t tag) { return static_cast<CommOp>((tag & kKindBits) >> kKindShift); }

}  // namespace

std::string different_collectives(int their_rank, CommOp theirs, int my_rank, CommOp mine) {
  return "rank " + std::to_string(their_rank) + " called " + comm_op_name(theirs) + " where rank " +
         std::to_string(my_rank) + " called " + comm_op_name(mine) +
         ": ranks issued different collectives (a bug in the caller: every rank must issue the "
         "same collectives with the same sizes, in the same order; at ZeRO stage 3, a forward "
         "that used a parameter on some ranks and not on others, such as a branch on the batch, "
         "which stage 3 does not train)";
}

uint32_t Transport::op_seq(uint32_t index, CommOp kind) {
  static_assert(kNumCommOps <= 8, "an op's kind has 3 bits of its tags");
  return ((index & 0xFFFFF) << 4) | (static_cast<uint32_t>(kind) << kKindInSeq);
}

uint64_t Transport::make_tag(uint32_t seq, int src, int step, int chunk) {
  // [seq:24][src:12][step:12][chunk:16]
  return (static_cast<uint64_t>(seq & 0xFFFFFF) << kSeqShift) |
         (static_cast<uint64_t>(src & 0xFFF) << 28) | (static_cast<uint64_t>(step & 0xFFF) << 16) |
         static_cast<uint64_t>(chunk & 0xFFFF);
}

int Transport::tag_step(uint64_t tag) { return static_cast<int>((tag >> 16) & 0xFFF); }

Transport::Transport(const CommContext& ctx, const TransportOptions& options)
    : rank_(ctx.rank), world_(ctx.world), timeout_(ctx.timeout) {
  if (world_ > 4096) throw CommError("comm_ucx supports at most 4096 ranks");
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  if (!options.tls.empty()) {
    ucs_status_t s = ucp_config_modify(config, "TLS", options.tls.c_str());
    if (s != UCS_OK) {
      ucp_config_release(config);
      throw ConfigError(options.tls_where + ": plugin.comm_ucx.tls = \"" + options.tls +
                        "\" was refused by UCX (" + ucs_status_string(s) +
                        "); use names from `ucx_info -d`, e.g. "
                        "\"shm,tcp\"");
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  // TAG for the ring algorithms; RMA so ranks on one host can map each other's segments.
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
  ucs_status_t status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (status != UCS_OK && !options.tls.empty()) {
    throw ConfigError(options.tls_where + ": plugin.comm_ucx.tls = \"" + options.tls +
                      "\" leaves UCX no usable "
                      "transport (" +
                      ucs_status_string(status) +
                      "); use names from "
                      "`ucx_info -d`, e.g. \"shm,tcp\", or \"\" to let UCX choose");
  }
  check(status, "ucp_init");

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // Serialized, not single: the worker is made and torn down on the caller's thread and used on
  // the family's comm thread in between, one at a time (thread start and join order them);
  // UCX's single mode allows only the thread that made it.
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  status = ucp_worker_create(context_, &wparams, &worker_);
  if (status != UCS_OK) {
    ucp_cleanup(context_);
    check(status, "ucp_worker_create");
  }

  try {
    ucp_address_t* address = nullptr;
    size_t address_len = 0;
    check(ucp_worker_get_address(worker_, &address, &address_len), "ucp_worker_get_address");
    std::vector<uint8_t> mine(reinterpret_cast<uint8_t*>(address),
                              reinterpret_cast<uint8_t*>(address) + address_len);
    ucp_worker_release_address(worker_, address);
    ctx.store->set(ctx.store_prefix + "ucx_address/" + std::to_string(rank_), mine);

    endpoints_.assign(world_, nullptr);
    peer_failures_.assign(world_, "");
    peer_error_args_.resize(world_);
    for (int peer = 0; peer < world_; ++peer) {
      if (peer == rank_) continue;
      std::vector<uint8_t> theirs = ctx.store->get(
          ctx.store_prefix + "ucx_address/" + std::to_string(peer), timeout_);
      peer_error_args_[peer] = {this, peer};
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
      ep.address = reinterpret_cast<const ucp_address_t*>(theirs.data());
      if (options.peer_error_handling) {
        ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        ep.err_handler.cb = &Transport::on_peer_error;
        ep.err_handler.arg = &peer_error_args_[peer];
      }
      check(ucp_ep_create(worker_, &ep, &endpoints_[peer]),
            "ucp_ep_create to rank " + std::to_string(peer));
    }
  } catch (...) {
    for (auto ep : endpoints_) {
      if (ep) ucp_ep_destroy(ep);
    }
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    throw;
  }
}

Transport::~Transport() {
  // Whatever an op's failure left in flight (its buffers are freed only after this).
  cancel_outstanding(std::chrono::seconds(2));
  // Close every endpoint; a dead peer cannot flush, so close with FORCE and bound the wait.
  std::vector<void*> closing;
  for (auto ep : endpoints_) {
    if (!ep) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = broken() ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(req)) closing.push_back(req);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!closing.empty() && std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(worker_);
    closing.erase(std::remove_if(
                      closing.begin(), closing.end(),
                      [](void* r) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
      ucp_request_free(r);
      return true;
                      }),
                  closing.end());
  }
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

Transport::Pending* Transport::new_pending(int peer, bool is_recv, size_t bytes, Handler on_done) {
  Pending* p;
  if (!free_.empty()) {
    p = free_.back();
    free_.pop_back();
  } else {
    pool_.emplace_back();
    p = &pool_.back();
  }
  *p = Pending{};
  p->owner = this;
  p->peer = peer;
  p->is_recv = is_recv;
  p->bytes = bytes;
  p->on_done = std::move(on_done);
  ++outstanding_;
  return p;
}

void Transport::track(Pending* p, ucs_status_ptr_t status) {
  // A receive's callback may already have run, inside the call: the request it returns is then
  // released, and the callback has queued the completion.
  if (p->finished) return;
  if (status == nullptr) {  // a send completed in place: no callback will come
    p->received = p->bytes;
    completed_.push_back(p);
  } else if (UCS_PTR_IS_ERR(status)) {
    p->status = UCS_PTR_STATUS(status);
    completed_.push_back(p);
  } else {
    p->request = status;
  }
}

void Transport::post_send(int peer, const void* buf, size_t bytes, uint64_t tag, Handler on_done) {
  Pending* p = new_pending(peer, false, bytes, std::move(on_done));
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(1);
  param.cb.send = &Transport::on_send_done;
  param.user_data = p;
  wire_bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
  track(p, ucp_tag_send_nbx(endpoints_[peer], buf, bytes, tag, &param));
}

void Transport::post_recv(int peer, void* buf, size_t bytes, uint64_t tag, Handler on_done) {
  Pending* p = new_pending(peer, true, bytes, std::move(on_done));
  p->tag = tag;
  ucp_request_param_t param{};
  // Never completed in place: the callback gets the message's length, which UCX 1.13 does not
  // report for a receive that matched a waiting message at once (recv_info stays unset there),
  // so a peer that sent fewer bytes than this rank expects would pass unseen.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.datatype = ucp_dt_make_contig(1);
  param.cb.recv = &Transport::on_recv_done;
  param.user_data = p;
  track(p, ucp_tag_recv_nbx(worker_, buf, bytes, tag, ~kKindBits, &param));
}

void Transport::on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* p = static_cast<Pending*>(user_data);
  p->status = status;
  p->received = p->bytes;
  p->request = nullptr;
  p->finished = true;
  ucp_request_free(request);
  p->owner->completed_.push_back(p);
}

void Transport::on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                             void* user_data) {
  auto* p = static_cast<Pending*>(user_data);
  p->status = status;
  p->received = (status == UCS_OK && info) ? info->length : 0;
  p->sender_tag = (status == UCS_OK && info) ? info->sender_tag : p->tag;
  p->request = nullptr;
  p->finished = true;
  ucp_request_free(request);
  p->owner->completed_.push_back(p);
}

void Transport::on_peer_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* e = static_cast<PeerError*>(arg);
  e->owner->peer_failures_[e->peer] = ucs_status_string(status);
}

void Transport::mark_broken(const std::string& reason) {
  if (broken()) return;
  broken_reason_ = reason;
  broken_.store(true, std::memory_order_release);
}

void Transport::fail(const std::string& message) {
  mark_broken(message);
  cancel_outstanding();
  throw CommError(message);
}

void Transport::cancel_outstanding(std::chrono::milliseconds bound) {
  // By the requests themselves, not outstanding_: a cancellation that did not finish within an
  // earlier bound is tried again (the destructor's), though run() counts nothing in flight.
  const auto in_flight = [this] {
    for (auto& p : pool_)
      if (p.request) return true;
    return false;
  };
  if (worker_ == nullptr || !in_flight()) {
    completed_.clear();
    outstanding_ = 0;
    return;
  }
  for (auto& p : pool_) {
    if (p.request) ucp_request_cancel(worker_, p.request);
  }
  // Let cancellations complete so UCX stops touching user buffers; bounded.
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (in_flight() && std::chrono::steady_clock::now() < deadline) ucp_worker_progress(worker_);
  completed_.clear();
  outstanding_ = 0;
}

void Transport::run(const std::string& what, Waits waits, const std::vector<int>* ring) {
  if (broken()) {
    throw CommError("comm_ucx is unusable after an earlier failure (" + broken_reason_ +
                    "); restart the job");
  }
  auto last_progress = std::chrono::steady_clock::now();
  uint32_t spins = 0;
  while (outstanding_ > 0) {
    unsigned events = ucp_worker_progress(worker_);
    while (!completed_.empty()) {
      Pending* p = completed_.back();
      completed_.pop_back();
      --outstanding_;
      last_progress = std::chrono::steady_clock::now();
      if (p->status != UCS_OK) {
        std::string why = ucs_status_string(p->status);
        if (p->status == UCS_ERR_MESSAGE_TRUNCATED) {
          why = "rank " + std::to_string(p->peer) + " sent more than the " +
                std::to_string(p->bytes) + " bytes expected: ranks called " + what +
                " with different sizes";
        } else if (!peer_failures_[p->peer].empty()) {
          why = "rank " + std::to_string(p->peer) +
                " is unreachable (UCX: " + peer_failures_[p->peer] + "); it probably died";
        } else {
          why = std::string(p->is_recv ? "receive from" : "send to") + " rank " +
                std::to_string(p->peer) + " failed (UCX: " + why + ")";
        }
        fail("comm_ucx: " + what + ": " + why);
      }
      if (p->is_recv && kind_of(p->sender_tag) != kind_of(p->tag)) {
        fail("comm_ucx: " + what + ": " +
             different_collectives(p->peer, kind_of(p->sender_tag), rank_, kind_of(p->tag)));
      }
      if (p->is_recv && p->received != p->bytes) {
        fail("comm_ucx: " + what + ": rank " + std::to_string(p->peer) + " sent " +
             std::to_string(p->received) + " bytes where " + std::to_string(p->bytes) +
             " were expected: ranks called it with different sizes");
      }
      Handler h = std::move(p->on_done);
      free_.push_back(p);
      if (h) h();
    }
    if (outstanding_ == 0) break;
    for (int peer = 0; peer < world_; ++peer) {
      if (!peer_failures_[peer].empty()) {
        fail("comm_ucx: " + what + ": rank " + std::to_string(peer) +
             " is unreachable (UCX: " + peer_failures_[peer] + "); it probably died");
      }
    }
    if (events != 0) continue;
    ++spins;
    // Every 16 idle polls the core goes to whoever else wants it: with more ranks than cores
    // (4 ranks on 2 cores across two hosts), the peer this rank waits for is often queued on
    // this very core, and yielding only every 1024 polls made each hop of a ring wait
    // milliseconds for it (measured: 4x the step time over TCP). Alone on its core, a yield
    // returns at once.
    if ((spins & 0xF) == 0) std::this_thread::yield();
    if ((spins & 0x3FF) == 0) {
      auto now = std::chrono::steady_clock::now();
      if (now - last_progress > timeout_) {
        // Name a peer we are still waiting on, receives first: they tell who is silent. The
        // earliest step's: later ones wait behind it.
        int waiting = -1, step = 0;
        for (auto& p : pool_) {
          if (p.request && p.is_recv && (waiting < 0 || tag_step(p.tag) < step)) {
            waiting = p.peer;
            step = tag_step(p.tag);
          }
        }
        // A ring step counts back only from a receive: a pending send names the next rank.
        const bool from_receive = waiting >= 0;
        for (auto& p : pool_) {
          if (waiting < 0 && p.request) waiting = p.peer;
        }
        // On a chain every rank behind the one that stopped stalls too, naming its neighbour:
        // say so, or a live rank is blamed (rank 0's error, the one read, names rank N-1).
        std::string chain =
            waits == Waits::kChain
                ? " (the rank before this one in the ring: each rank waits for the one before "
                  "it, so the rank that stopped is the one whose own error is missing or names "
                  "another cause)"
                : "";
        const std::string stopped = ring && from_receive ? stopped_member(*ring, waiting, step)
                                                         : "";
        if (!stopped.empty()) chain += "; " + stopped;
        fail("comm_ucx: " + what + ": no progress for " + std::to_string(timeout_.count()) +
             " ms while waiting for rank " + std::to_string(waiting) + chain +
             "; it died, stalled, or called a different collective (raise launch.timeout_s "
             "if it is just slow)");
      }
    }
  }
}

}  // namespace zt::ucx
