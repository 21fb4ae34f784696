#include "util/save_io_limit.h"

#include <atomic>

#include "util/fault_injection.h"

namespace zt::ckpt {

namespace {

thread_local const SaveIoLimit* t_limit = nullptr;

// ZT_TEST_FAULT stall_checkpoint_write:RANK:N counts the watched operations of this process.
std::atomic<int64_t> watched_calls{0};

}  // namespace

SaveIoLimit::SaveIoLimit(std::chrono::milliseconds limit, std::string way_out)
    : limit_(limit), way_out_(std::move(way_out)), outer_(t_limit) {
  t_limit = this;
}

SaveIoLimit::~SaveIoLimit() { t_limit = outer_; }

SaveIoDeadline::SaveIoDeadline(const std::string& what) {
  const SaveIoLimit* limit = t_limit;
  if (limit == nullptr || limit->limit_.count() <= 0) return;
  deadline_.emplace(what, limit->limit_, limit->way_out_);
  stall_if_injected("stall_checkpoint_write", watched_calls, limit->limit_);
}

}  // namespace zt::ckpt
