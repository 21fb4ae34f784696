// observe_tier (flight_recorder.h): reads and writes of a tier labelled with the region they
// move, timed on the thread that completed them (the storage lane of the trace), and a blocked
// wait on one named in the waiting thread's activity ("offload read of optim.exp_avg ...").
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "observe/observed_work.h"
#include "util/fault_injection.h"
#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/host/flight_recorder.h"
#include "zt/host/trace.h"

namespace zt {

namespace {

struct TransferState {
  bool read = true;
  int64_t bytes = 0;
  int64_t issued_ns = 0;
  std::string label;  // "offload read of optim.exp_avg (4.0 MiB, offload_nvme: files under ...)"
  std::atomic<bool> done{false};
};

// The transfer on its tier's lane, from issue to completion (the lane runs them in sequence;
// a tier with a deeper queue overlaps them, which the lane shows one after the other).
void record_transfer(TransferState& s, const std::string& lane) {
  if (s.done.exchange(true) || !trace::recording()) return;
  trace::Event e;
  e.name = s.read ? "read" : "write";
  e.category = trace::kIo;
  e.begin_ns = s.issued_ns;
  e.end_ns = trace::now_ns();
  e.bytes = s.bytes;
  e.detail = s.label;
  trace::add_lane_event(lane, std::move(e));
}

// A transfer's handle: a blocked wait names the region and the tier; ZT_TEST_FAULT stall_read
// holds it forever (until the launcher stops the job).
class TransferWork final : public ObservedWork {
 public:
  TransferWork(std::shared_ptr<Work> inner, std::shared_ptr<TransferState> state, bool stall)
      : ObservedWork(std::move(inner)), state_(std::move(state)), stall_(stall) {}

 private:
  std::string waiting_label() const override { return state_->label; }
  void waited(bool, const std::exception*) override {}
  bool stalled() const override { return stall_; }
  [[noreturn]] void stall() override {
    std::this_thread::sleep_for(std::chrono::hours(1));
    throw IoError(state_->label + " stalled (injected by " + std::string(kTestFaultVar) + ")");
  }

  std::shared_ptr<TransferState> state_;
  bool stall_;
};

class ObservedTier final : public OffloadTier {
 public:
  ObservedTier(std::unique_ptr<OffloadTier> inner, std::string id)
      : inner_(std::move(inner)), id_(std::move(id)), lane_("offload io " + id_) {}

  std::string describe() const override { return inner_->describe(); }
  void prepare(int64_t total_bytes) override { inner_->prepare(total_bytes); }
  int64_t allocate(const std::string& name, int64_t bytes) override {
    const int64_t region = inner_->allocate(name, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    names_[region] = name;
    return region;
  }
  void release(int64_t region) override {
    inner_->release(region);
    std::lock_guard<std::mutex> lock(mutex_);
    names_.erase(region);
  }
  void* address(int64_t region) override { return inner_->address(region); }
  std::shared_ptr<Work> write(int64_t region, int64_t offset, const void* host,
                              int64_t bytes) override {
    auto s = state(false, region, bytes);
    return observed(inner_->write(region, offset, host, bytes), std::move(s), false);
  }
  std::shared_ptr<Work> read(int64_t region, int64_t offset, void* host, int64_t bytes) override {
    auto s = state(true, region, bytes);
    const InjectedFault& fault = injected_fault();
    const bool nth = fault.rank == env_rank() && ++reads_ == fault.nth;
    if (nth && fault.kind == "fail_read") {
      // As a device error: the read is not issued, and its wait throws.
      auto failed = std::make_shared<FutureWork>(s->label, std::chrono::seconds(60));
      failed->complete(std::make_exception_ptr(
          IoError(s->label + ": failed: Input/output error (injected by " + kTestFaultVar + ")")));
      return failed;
    }
    return observed(inner_->read(region, offset, host, bytes), std::move(s),
                    nth && fault.kind == "stall_read");
  }
  at::Tensor host_buffer(int64_t bytes) override { return inner_->host_buffer(bytes); }
  int64_t alignment() const override { return inner_->alignment(); }
  void check() override { inner_->check(); }
  void set_step(int64_t step) override { inner_->set_step(step); }
  OffloadStats stats() const override { return inner_->stats(); }

 private:
  std::shared_ptr<TransferState> state(bool read, int64_t region, int64_t bytes) {
    auto s = std::make_shared<TransferState>();
    s->read = read;
    s->bytes = bytes;
    s->issued_ns = trace::now_ns();
    std::string name;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = names_.find(region);
      if (it != names_.end()) name = it->second;
    }
    if (where_.empty()) where_ = id_ + ": " + inner_->describe();
    s->label = std::string("offload ") + (read ? "read of " : "write of ") + name + " (" +
               size_text(bytes) + ", " + where_ + ")";
    return s;
  }

  std::shared_ptr<Work> observed(std::shared_ptr<Work> work, std::shared_ptr<TransferState> s,
                                 bool stall) {
    if (auto* future = dynamic_cast<FutureWork*>(work.get())) {
      future->on_complete([s, lane = lane_](bool) { record_transfer(*s, lane); });
    }
    return std::make_shared<TransferWork>(std::move(work), std::move(s), stall);
  }

  std::unique_ptr<OffloadTier> inner_;
  std::string id_;
  std::string lane_;   // of the trace
  std::string where_;  // the tier in labels, found on the first transfer (after prepare)
  std::mutex mutex_;
  std::map<int64_t, std::string> names_;
  int64_t reads_ = 0;
};

}  // namespace

std::unique_ptr<OffloadTier> observe_tier(std::unique_ptr<OffloadTier> inner,
                                          const std::string& id) {
  if (!inner) throw InternalError("observe_tier: null tier");
  return std::make_unique<ObservedTier>(std::move(inner), id);
}

}  // namespace zt
