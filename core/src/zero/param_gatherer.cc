#include "zero/param_gatherer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <exception>

#include "zero/coded_collectives.h"

namespace zt {

ParamGatherer::ParamGatherer(ModelLayout& layout, std::vector<ShardStorage>& storage,
                             Communicator& comm, OffloadTier* param_tier, GatherOptions options,
                             MemoryLedger& ledger)
    : layout_(layout),
      storage_(storage),
      comm_(comm),
      param_tier_(param_tier),
      options_(options),
      ledger_(ledger),
      state_(layout.groups.size()) {
  for (int u = static_cast<int>(layout.unit_groups.size()) - 1; u >= 0 && turn_unit_ < 0; --u) {
    for (int g : layout.unit_groups[u]) {
      if (!layout.groups[g].persistent) turn_unit_ = u;
    }
  }
}

// In-flight reads and gathers write into buffers the engine owns: let them finish first, also
// when the engine is torn down by an error.
ParamGatherer::~ParamGatherer() {
  drop_fetches(/*rethrow=*/false);
  for (auto& s : state_) {
    if (!s.pending_gather) continue;
    try {
      s.pending_gather->wait();
    } catch (...) {
    }
  }
}

void ParamGatherer::drop_fetches(bool rethrow) {
  std::exception_ptr first;
  for (auto& s : state_) {
    if (s.fetch_work) {
      try {
        ledger_.clock().wait(*s.fetch_work, &EngineTimes::read_wait);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    s.fetch_work.reset();
    forget_fetched(s);
  }
  if (first && rethrow) std::rethrow_exception(first);
}

void ParamGatherer::forget_fetched(GroupState& s) {
  if (!s.fetched.defined()) return;
  ledger_.staging_freed(static_cast<int64_t>(s.fetched.nbytes()));
  s.fetched = at::Tensor();
}

// Streamed parameter shards: reads the shard from its tier into a host buffer, ahead of the
// gather that needs it.
void ParamGatherer::fetch(int gi) {
  GroupState& s = state_[gi];
  const ShardStorage& st = storage_[gi];
  if (!st.param_streamed || s.gathered || s.pending_gather || s.fetch_work) return;
  forget_fetched(s);
  s.fetched = param_tier_->host_buffer(layout_.groups[gi].shard * element_size());
  s.fetch_work = st.param_file->read_all(s.fetched.data_ptr());
  ledger_.staging_added(static_cast<int64_t>(s.fetched.nbytes()));
}

void ParamGatherer::start_gather(int gi) {
  GroupState& s = state_[gi];
  const ParamGroup& g = layout_.groups[gi];
  if (s.gathered || s.pending_gather) return;
  at::Tensor source = storage_[gi].param_shard;
  if (storage_[gi].param_streamed) {
    fetch(gi);
    try {
      ledger_.clock().wait(*s.fetch_work, &EngineTimes::read_wait);
      s.fetch_work.reset();
      storage_[gi].param_file->verify_all(s.fetched.data_ptr(), step_);
    } catch (...) {
      // A read that failed (EIO) or a shard that fails its check: forgotten, so the next pass
      // reads it again; kept, every later forward rethrew this error until a checkpoint load.
      // A read that only ran out of time may still write into its buffer: kept, and the next
      // pass waits for it again.
      if (!s.fetch_work || s.fetch_work->is_completed()) {
        s.fetch_work.reset();
        forget_fetched(s);
      }
      throw;
    }
    // A view of the buffer itself, so the gather's handle keeps it alive until it is done; on
    // another device, a copy there (the NVMe tier's buffer is pageable, so the copy has read it
    // when it returns, before forget_fetched() can let it go).
    source = s.fetched.view(g.flat.scalar_type())
                 .narrow(0, 0, g.shard)
                 .to(g.flat.device(), /*non_blocking=*/true);
  } else if (source.device() != g.flat.device()) {
    // A shard in host memory (offload_cpu) for a flat buffer on a GPU: a device communicator
    // (comm_nccl) gathers from its device. The copy need not block: the gather is queued after
    // it on the same stream, and whatever writes the shard (the step's refresh, a streamed
    // update, with_gathered_parameters, a checkpoint load) does so only once no gather of it
    // is pending (a host communicator reading the shard in place needs the same).
    source = source.to(g.flat.device(), /*non_blocking=*/true);
  }
  take_storage(g.flat, static_cast<size_t>(g.padded * element_size()));
  layout_.bind_views(gi);
  ledger_.gathered(g.padded * element_size());
  try {
    s.pending_gather = options_.codec && !exact_
                           ? coded_all_gather(comm_, *options_.codec, g.flat, source)
                           : comm_.all_gather(g.flat, source);
  } catch (...) {
    // Nothing was issued: the group goes back to released. Left filled and not gathered, it was
    // never freed, and its next gather failed on the filled storage, hiding this error.
    resize_flat_storage(g.flat, 0);
    layout_.empty_views(gi);
    ledger_.released(g.padded * element_size());
    forget_fetched(s);
    throw;
  }
}

void ParamGatherer::ensure_gathered(int gi) {
  GroupState& s = state_[gi];
  if (s.gathered) return;
  start_gather(gi);
  ledger_.clock().wait(*s.pending_gather, &EngineTimes::comm_wait);
  s.pending_gather.reset();
  s.gathered = true;
  forget_fetched(s);
}

void ParamGatherer::release(int gi) {
  GroupState& s = state_[gi];
  const ParamGroup& g = layout_.groups[gi];
  if (g.persistent) return;
  // A prefetched gather nothing used (a forward that is not a chain prefetches by unit order):
  // it goes too, or the next step would find it holding the values of the step before.
  if (s.pending_gather) {
    ledger_.clock().wait(*s.pending_gather, &EngineTimes::comm_wait);
    s.pending_gather.reset();
    s.gathered = true;
    forget_fetched(s);
  }
  if (!s.gathered) return;
  give_storage(g.flat);
  layout_.empty_views(gi);
  s.gathered = false;
  ledger_.released(g.padded * element_size());
}

void ParamGatherer::release_all(bool keep_spares) {
  for (size_t g = 0; g < state_.size(); ++g) release(static_cast<int>(g));
  // Kept through the step, where nothing is gathered: no more than the next forward's first
  // unit and its prefetch would gather, so within the gathered window the memory fit counts.
  size_t kept = 0;
  if (keep_spares) {
    kept = options_.prefetch_elements > 0
               ? kSpareBuffers
               : std::min(kSpareBuffers, static_cast<size_t>(1 + options_.prefetch_units));
  }
  while (spare_.size() > kept) spare_.pop_back();
}

// A group's flat storage (params are views of it) gets `bytes`: a kept buffer of that size, or
// a new one.
void ParamGatherer::take_storage(const at::Tensor& flat, size_t bytes) {
  for (auto it = spare_.begin(); it != spare_.end(); ++it) {
    if (it->bytes != bytes) continue;
    c10::StorageImpl& storage = *flat.storage().unsafeGetStorageImpl();
    storage.set_data_ptr_noswap(std::move(it->data));
    storage.set_nbytes(bytes);
    spare_.erase(it);
    return;
  }
  resize_flat_storage(flat, static_cast<int64_t>(bytes));
}

// Empties a group's flat storage, keeping its buffer for the next gather when there is room.
void ParamGatherer::give_storage(const at::Tensor& flat) {
  c10::StorageImpl& storage = *flat.storage().unsafeGetStorageImpl();
  if (spare_.size() >= kSpareBuffers || storage.nbytes() == 0) {
    resize_flat_storage(flat, 0);
    return;
  }
  const size_t bytes = storage.nbytes();
  spare_.push_back({storage.set_data_ptr(c10::DataPtr(nullptr, storage.device())), bytes});
  storage.set_nbytes(0);
}

std::vector<int> ParamGatherer::prefetch_window(int u, int direction) const {
  std::vector<int> out;
  const int units = static_cast<int>(layout_.unit_groups.size());
  int64_t elements = 0, live = ledger_.report().params_gathered / element_size();
  for (int next = u + direction; next >= 0 && next < units; next += direction) {
    int64_t unit_elements = 0;
    for (int g : layout_.unit_groups[next]) unit_elements += layout_.groups[g].padded;
    const bool window_full = options_.prefetch_elements > 0
                                 ? elements >= options_.prefetch_elements
                                 : static_cast<int64_t>(out.size()) >= options_.prefetch_units;
    if (window_full || live + unit_elements > options_.max_live_parameters) break;
    elements += unit_elements;
    live += unit_elements;
    out.push_back(next);
  }
  return out;
}

void ParamGatherer::gather_unit(int u, int direction) {
  for (int g : layout_.unit_groups[u]) ensure_gathered(g);
  const std::vector<int> window = prefetch_window(u, direction);
  for (int next : window) {
    for (int g : layout_.unit_groups[next]) start_gather(g);
  }
  // Offloaded shards are read one unit further ahead than they are gathered, so the tier's
  // latency hides behind this unit's compute too.
  const int beyond = (window.empty() ? u : window.back()) + direction;
  if (beyond >= 0 && beyond < static_cast<int>(layout_.unit_groups.size())) {
    for (int g : layout_.unit_groups[beyond]) fetch(g);
  }
}

bool ParamGatherer::needed_soon(int g, int u, int direction) const {
  for (int next : prefetch_window(u, direction)) {
    if (layout_.unit_uses(next, g)) return true;
  }
  return false;
}

void ParamGatherer::release_after_forward(int u, bool backward_follows) {
  // Backward's first unit gathers these again at once: released, they cost a gather a step.
  if (backward_follows && u == turn_unit_) return;
  for (int g : layout_.unit_groups[u]) {
    if (!needed_soon(g, u, +1)) release(g);
  }
}

void ParamGatherer::release_after_backward(int done, int next) {
  if (done >= static_cast<int>(layout_.unit_groups.size())) return;
  for (int g : layout_.unit_groups[done]) {
    if (!layout_.unit_uses(next, g) && !needed_soon(g, next, -1)) release(g);
  }
}

}  // namespace zt
