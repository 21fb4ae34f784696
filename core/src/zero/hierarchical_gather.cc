#include "zero/hierarchical_gather.h"

#include <ATen/ATen.h>

#include "zero/coded_collectives.h"
#include "zt/error.h"

namespace zt {

namespace {

// "Wait as long as the level's own op does" (Work::wait() without an argument).
constexpr std::chrono::milliseconds kOwnTimeout{-1};

// The handle of one two-level gather: waiting starts its second level (and every earlier one's),
// waits for it, and puts the blocks in place.
class TwoLevelWork final : public Work {
 public:
  TwoLevelWork(HierarchicalGather& owner, std::shared_ptr<HierarchicalGather::Pending> p)
      : owner_(owner), p_(std::move(p)) {}

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return p_->placed || exception_now() != nullptr;
  }
  // Without a timeout each level waits as long as its own communicator's ops do.
  void wait() override { wait(kOwnTimeout); }
  void wait(std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (p_->placed) return;
    owner_.start_through(p_.get(), timeout);
    if (!p_->second) {
      throw InternalError("two-level gather: a gather waited for was never started");
    }
    if (timeout == kOwnTimeout) p_->second->wait();
    else p_->second->wait(timeout);
    // gathered is [place][host][c]; the flat order is [host][place][c].
    const int64_t places = p_->gathered.size(0), hosts = p_->gathered.size(1);
    p_->out.view({hosts, places, -1}).copy_(p_->gathered.transpose(0, 1));
    p_->placed = true;
    p_->across.reset();
    p_->gathered.reset();
  }
  std::exception_ptr exception() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return exception_now();
  }

 private:
  std::exception_ptr exception_now() {
    if (auto e = p_->first->exception()) return e;
    return p_->second ? p_->second->exception() : nullptr;
  }

  HierarchicalGather& owner_;
  std::shared_ptr<HierarchicalGather::Pending> p_;
  std::mutex mutex_;
};

}  // namespace

HierarchicalGather::HierarchicalGather(Communicator& shard, int ranks_per_host)
    : shard_(shard), per_host_(ranks_per_host), hosts_(shard.size() / ranks_per_host) {
  if (ranks_per_host < 1 || shard.size() % ranks_per_host != 0) {
    throw ConfigError("zero.mics_hierarchical_params_gather: " + std::to_string(ranks_per_host) +
                      " ranks per host do not divide the shard group of " +
                      std::to_string(shard.size()) +
                      " ranks; make zero.mics_shard_size a multiple of the ranks per host");
  }
  const int r = shard.rank();
  across_ = shard.split(r % per_host_, r);
  within_ = shard.split(r / per_host_, r);
}

HierarchicalGather::~HierarchicalGather() = default;

std::string HierarchicalGather::describe() const {
  return "two-level gather: across " + std::to_string(hosts_) + " hosts (" + across_->describe() +
         "), then within " + std::to_string(per_host_) + " ranks (" + within_->describe() + ")";
}

std::shared_ptr<Work> HierarchicalGather::gather(const at::Tensor& out_flat,
                                                 const at::Tensor& in_shard, const Codec* codec) {
  const int64_t k = shard_.size();
  // The engine's flat buffers always divide by the group; anything else takes the flat path.
  if (out_flat.numel() % k != 0 || in_shard.numel() != out_flat.numel() / k) {
    return codec ? zt::coded_all_gather(shard_, *codec, out_flat, in_shard)
                 : shard_.all_gather(out_flat, in_shard);
  }
  const int64_t c = out_flat.numel() / k;
  auto p = std::make_shared<Pending>();
  p->out = out_flat;
  p->across = at::empty({hosts_ * c}, out_flat.options());
  p->first = codec ? zt::coded_all_gather(*across_, *codec, p->across, in_shard)
                   : across_->all_gather(p->across, in_shard);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    unstarted_.push_back(p);
  }
  return std::make_shared<TwoLevelWork>(*this, std::move(p));
}

void HierarchicalGather::start_through(const Pending* p, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (p->second) return;
  while (!unstarted_.empty()) {
    std::shared_ptr<Pending> q = unstarted_.front();
    // Taken off the queue only once its first level arrived: a first level that fails stays
    // queued, so every later wait on it (the engine's teardown too) meets its error again, not a
    // gather without a second level.
    if (timeout == kOwnTimeout) q->first->wait();
    else q->first->wait(timeout);
    unstarted_.pop_front();
    const int64_t c = q->across.numel() / hosts_;
    q->gathered = at::empty({per_host_, hosts_, c}, q->across.options());
    q->second = within_->all_gather(q->gathered.view({-1}), q->across);
    if (q.get() == p) return;
  }
}

CommStats HierarchicalGather::stats() const {
  CommStats s = shard_.stats();
  add_stats(s, level_stats());
  return s;
}

CommStats HierarchicalGather::level_stats() const {
  CommStats s = across_->stats();
  add_stats(s, within_->stats());
  return s;
}

}  // namespace zt
