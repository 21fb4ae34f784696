// observe_communicator (flight_recorder.h): every collective recorded as it is issued and as it
// completes, the completion timed on the thread that completed it (the comm lane of the trace),
// and a blocked wait labelled in the waiting thread's activity.
#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "observe/observed_work.h"
#include "util/fault_injection.h"
#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/host/flight_recorder.h"
#include "zt/host/rank_agreement.h"
#include "zt/host/trace.h"

namespace zt {

namespace {

// What both the Work handed out and the completion callback know of one op.
struct OpState {
  int64_t key = 0;  // in the flight recorder
  int64_t seq = 0;
  CommOp op = CommOp::kBarrier;
  int64_t bytes = 0;
  int64_t issued_ns = 0;
  std::shared_ptr<const std::string> group;
  std::string phase;
  std::atomic<bool> done{false};
};

// Completes the op's record once, and puts it on its group's comm lane from issue to completion
// (the lane starts it when the op before it ended: ops of a communicator run one at a time).
void finish(OpState& s, bool failed) {
  if (s.done.exchange(true)) return;
  const int64_t end = trace::now_ns();
  FlightRecorder::instance().completed(s.key, end, failed);
  if (!trace::recording()) return;
  trace::Event e;
  e.name = comm_op_name(s.op);
  e.index = s.seq;
  e.category = trace::kComm;
  e.begin_ns = s.issued_ns;
  e.end_ns = end;
  e.bytes = s.bytes;
  e.detail = s.phase.empty() ? "" : "issued in " + s.phase;
  trace::add_lane_event("comm " + *s.group, std::move(e));
}

// A collective's handle: its wait is timed as "all_gather #12 wait" and, when it fails (a
// timeout, a dead peer), dumps the flight record while the thread still says where it waits.
class CollectiveWork final : public ObservedWork {
 public:
  CollectiveWork(std::shared_ptr<Work> inner, std::shared_ptr<OpState> state)
      : ObservedWork(std::move(inner)), state_(std::move(state)) {}

 private:
  Span span() const override {
    return {comm_op_name(state_->op), state_->seq, "wait", trace::kCommWait};
  }
  std::string waiting_label() const override {
    return std::string(comm_op_name(state_->op)) + " #" + std::to_string(state_->seq) + " (" +
           size_text(state_->bytes) + (state_->phase.empty() ? "" : ", " + state_->phase) +
           ") on " + *state_->group;
  }
  void waited(bool failed, const std::exception* error) override {
    // Recorded as ended first: dumped before, the failed op read "running".
    finish(*state_, failed);
    if (error) FlightRecorder::instance().dump_failure(error->what());
  }

  std::shared_ptr<OpState> state_;
};

// A stable number for a phase label, for the fingerprint.
int64_t phase_hash(const std::string& phase) {
  return static_cast<int64_t>(fingerprint_of(phase) & 0x7fffffffffffffffULL);
}

class ObservedCommunicator final : public Communicator {
 public:
  ObservedCommunicator(std::unique_ptr<Communicator> inner, std::string group,
                       ObserveOptions options)
      : inner_(std::move(inner)),
        group_(std::make_shared<const std::string>(std::move(group))),
        options_(options) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  std::string describe() const override { return inner_->describe(); }
  c10::Device device() const override { return inner_->device(); }
  CommStats stats() const override { return inner_->stats(); }

  std::shared_ptr<Work> all_gather(const at::Tensor& out_flat,
                                   const at::Tensor& in_shard) override {
    return observe(CommOp::kAllGather, out_flat,
                   [&] { return inner_->all_gather(out_flat, in_shard); });
  }
  std::shared_ptr<Work> reduce_scatter(const at::Tensor& out_shard, const at::Tensor& in_flat,
                                       ReduceOp op) override {
    return observe(CommOp::kReduceScatter, in_flat,
                   [&] { return inner_->reduce_scatter(out_shard, in_flat, op); });
  }
  std::shared_ptr<Work> all_reduce(const at::Tensor& tensor, ReduceOp op) override {
    return observe(CommOp::kAllReduce, tensor, [&] { return inner_->all_reduce(tensor, op); });
  }
  std::shared_ptr<Work> broadcast(const at::Tensor& tensor, int root) override {
    return observe(CommOp::kBroadcast, tensor, [&] { return inner_->broadcast(tensor, root); });
  }
  std::shared_ptr<Work> all_to_all(const at::Tensor& out, const at::Tensor& in) override {
    return observe(CommOp::kAllToAll, in, [&] { return inner_->all_to_all(out, in); });
  }
  std::shared_ptr<Work> barrier() override {
    return observe(CommOp::kBarrier, at::Tensor(), [&] { return inner_->barrier(); });
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    std::unique_ptr<Communicator> sub = inner_->split(color, key);
    if (!sub) return nullptr;
    if (sub->size() < 1 || sub->size() > size() || sub->rank() < 0 || sub->rank() >= sub->size()) {
      throw PluginError("communicator '" + inner_->name() + "' split " + *group_ + " (rank " +
                        std::to_string(rank()) + " of " + std::to_string(size()) +
                        ") into one that says rank " + std::to_string(sub->rank()) + " of " +
                        std::to_string(sub->size()) +
                        "; a split's communicator holds some of its parent's ranks (report it "
                        "to the plugin's authors)");
    }
    ++splits_;
    return std::make_unique<ObservedCommunicator>(
        std::move(sub),
        *group_ + ".split" + std::to_string(splits_) + "(color " + std::to_string(color) + ")",
        options_);
  }

 private:
  template <typename Issue>
  std::shared_ptr<Work> observe(CommOp op, const at::Tensor& payload, const Issue& issue) {
    const int64_t seq = ++seq_;
    const InjectedFault& fault = injected_fault();
    if (fault.kind == "skip_collective" && fault.rank == rank() && fault.nth == seq &&
        *group_ == "world" && !fault_fired_) {
      fault_fired_ = true;
      --seq_;  // as if this op was never called: every later op pairs with a peer's earlier one
      return std::make_shared<CompletedWork>();
    }
    auto s = std::make_shared<OpState>();
    s->seq = seq;
    s->op = op;
    s->bytes = payload.defined() ? static_cast<int64_t>(payload.nbytes()) : 0;
    s->group = group_;
    s->phase = trace::current_activity();
    const std::string dtype = payload.defined() ? c10::toString(payload.scalar_type()) : "";
    s->issued_ns = trace::now_ns();
    CollectiveRecord record;
    record.seq = seq;
    record.group = *group_;
    record.op = comm_op_name(op);
    record.bytes = s->bytes;
    record.dtype = dtype;
    record.phase = s->phase;
    record.issued_ns = s->issued_ns;
    s->key = FlightRecorder::instance().issued(std::move(record));
    if (options_.check_collectives && size() > 1) {
      try {
        check_fingerprint(*s, dtype);
      } catch (...) {
        finish(*s, true);  // recorded as failed: the diagnosis compares it with the peers'
        throw;
      }
    }
    std::shared_ptr<Work> work;
    try {
      work = issue();
    } catch (...) {
      // Refused at the call (a dtype the plugin lacks, a shard of the wrong size): failed, not
      // running, or the diagnosis reads this rank as waiting in it with its peers.
      finish(*s, true);
      throw;
    }
    if (!work) {
      // Waited for, a null Work was a crash with no message.
      finish(*s, true);
      throw PluginError("communicator '" + inner_->name() + "' (" + *group_ +
                        ") returned no Work for its " + comm_op_name(op) + " #" +
                        std::to_string(seq) +
                        "; a communicator plugin's collectives return a Work or throw (report "
                        "it to the plugin's authors)");
    }
    if (auto* future = dynamic_cast<FutureWork*>(work.get())) {
      future->on_complete([s](bool failed) { finish(*s, failed); });
    }
    return std::make_shared<CollectiveWork>(std::move(work), std::move(s));
  }

  // launch.check_collectives: the ranks compare (seq, op, bytes, dtype, phase) before the op.
  void check_fingerprint(const OpState& s, const std::string& dtype) {
    constexpr int kFields = 5;
    const int64_t mine[kFields] = {s.seq, static_cast<int64_t>(s.op), s.bytes, phase_hash(dtype),
                                   phase_hash(s.phase)};
    at::Tensor own = at::empty({kFields}, at::kLong);
    std::memcpy(own.data_ptr<int64_t>(), mine, sizeof mine);
    at::Tensor all = at::empty({kFields * size()}, at::kLong);
    all_gather_host(*inner_, all, own);  // comm_nccl takes its GPU's tensors only
    const int64_t* a = all.data_ptr<int64_t>();
    for (int r = 0; r < size(); ++r) {
      const int64_t* theirs = a + r * kFields;
      if (std::equal(mine, mine + kFields, theirs)) continue;
      const char* what = theirs[0] != mine[0]   ? "sequence number"
                         : theirs[1] != mine[1] ? "op"
                         : theirs[2] != mine[2] ? "size"
                         : theirs[3] != mine[3] ? "dtype"
                                                : "issuing phase";
      const auto op_of = [](int64_t v) {
        return v >= 0 && v < kNumCommOps ? comm_op_name(static_cast<CommOp>(v)) : "?";
      };
      throw CommError(
          "collective mismatch on " + *group_ + " (launch.check_collectives): rank " +
          std::to_string(rank()) + " issues " + op_of(mine[1]) + " #" + std::to_string(mine[0]) +
          " (" + size_text(mine[2]) + " " + dtype + ", " +
          (s.phase.empty() ? "no phase" : s.phase) + ") where rank " + std::to_string(r) +
          " issues " + op_of(theirs[1]) + " #" + std::to_string(theirs[0]) + " (" +
          size_text(theirs[2]) + "); they differ in " + what +
          ": the ranks do not run the same program (a rank skipped or reordered a collective)");
    }
  }

  std::unique_ptr<Communicator> inner_;
  std::shared_ptr<const std::string> group_;
  ObserveOptions options_;
  int64_t seq_ = 0;
  int splits_ = 0;
  bool fault_fired_ = false;  // ZT_TEST_FAULT skips one op, once
};

}  // namespace

std::unique_ptr<Communicator> observe_communicator(std::unique_ptr<Communicator> inner,
                                                   const std::string& group,
                                                   const ObserveOptions& options) {
  if (!inner) throw InternalError("observe_communicator: null communicator");
  return std::make_unique<ObservedCommunicator>(std::move(inner), group, options);
}

}  // namespace zt
