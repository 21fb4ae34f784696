#include "zero/streamed_update.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "zero/grad_squares.h"
#include "zero/weight_decay_runs.h"
#include "zt/error.h"

namespace zt {

StreamedUpdate::StreamedUpdate(ModelLayout& layout, std::vector<ShardStorage>& storage,
                               Optimizer& optimizer, OffloadTier* tier, StreamOptions options,
                               MemoryLedger& ledger)
    : layout_(layout),
      storage_(storage),
      optimizer_(optimizer),
      tier_(tier),
      options_(options),
      ledger_(ledger),
      arrays_(1 + static_cast<int64_t>(optimizer.state_names().size())),
      master_dtype_(optimizer.master_dtype()),
      state_dtype_(optimizer.state_dtype()),
      param_tile_(false) {
  for (const ShardStorage& s : storage_) {
    param_tile_ |= s.opt_streamed && s.param_streamed && options_.dtype != master_dtype_;
  }
}

std::vector<StreamedUpdate::Tile> StreamedUpdate::tiles() const {
  std::vector<Tile> out;
  for (size_t gi = 0; gi < storage_.size(); ++gi) {
    if (storage_[gi].opt_streamed && !storage_[gi].updated_in_backward)
      append_tiles(static_cast<int>(gi), out);
  }
  return out;
}

void StreamedUpdate::append_tiles(int g, std::vector<Tile>& out) const {
  const int64_t len = options_.tile_elements, shard = layout_.groups[g].shard;
  for (int64_t start = 0; start < shard; start += len)
    out.push_back({g, start, std::min(len, shard - start)});
}

void StreamedUpdate::ensure_buffer_sets(int sets) {
  while (static_cast<int>(sets_.size()) < sets) {
    std::vector<StagingBuffer> set;
    for (int64_t a = 0; a < arrays_ + 1 + (param_tile_ ? 1 : 0); ++a)
      set.emplace_back(*tier_, options_.tile_elements * 4, ledger_);
    sets_.push_back(std::move(set));
  }
}

// Array a of a group: 0 the master, 1.. each state, arrays_ the reduced gradient.
TieredArray& StreamedUpdate::array(const ShardStorage& s, int64_t a) const {
  if (a == arrays_) return *s.grad_file;
  return a == 0 ? *s.master_file : *s.state_files[a - 1];
}

void StreamedUpdate::read(const Tile& t, int set, int64_t arrays,
                          std::vector<std::shared_ptr<Work>>& works) {
  for (int64_t a = 0; a < arrays; ++a) {
    works.push_back(
        array(storage_[t.group], a).read_tile(t.start / options_.tile_elements, buffer(set, a)));
  }
}

void StreamedUpdate::verify(const Tile& t, int set, int64_t arrays, int64_t step) const {
  for (int64_t a = 0; a < arrays; ++a) {
    array(storage_[t.group], a).verify_tile(t.start / options_.tile_elements, buffer(set, a), step);
  }
}

void StreamedUpdate::update(const Tile& t, int set, const at::Tensor& grad, const StepArgs& args) {
  ShardStorage& s = storage_[t.group];
  const ParamGroup& g = layout_.groups[t.group];
  at::Tensor master = view_of(buffer(set, 0), t.len, master_dtype_);
  std::vector<at::Tensor> states;
  for (int64_t a = 1; a < arrays_; ++a)
    states.push_back(view_of(buffer(set, a), t.len, state_dtype_));
  {
    const EngineClock::Timer timer(ledger_.clock(), &EngineTimes::optimizer);
    std::vector<ShardTensors> slices;
    append_by_weight_decay(slices,
                           {master, grad, states, {}, state_seed(t.group, g.first, t.start)}, g,
                           g.first + t.start);
    optimizer_.step(slices, args);
  }
  if (options_.stage < 3) {
    g.flat.narrow(0, g.first + t.start, t.len).copy_(master);
  } else if (!s.param_streamed) {
    s.param_shard.narrow(0, t.start, t.len).copy_(master);
  } else if (param_tile_) {
    view_of(buffer(set, arrays_ + 1), t.len, options_.dtype).copy_(master);
  }
}

void StreamedUpdate::write(const Tile& t, int set, std::vector<std::shared_ptr<Work>>& works) {
  const ShardStorage& s = storage_[t.group];
  const int64_t tile = t.start / options_.tile_elements;
  for (int64_t a = 0; a < arrays_; ++a)
    works.push_back(array(s, a).write_tile(tile, buffer(set, a)));
  if (s.param_streamed) {
    void* params = buffer(set, param_tile_ ? arrays_ + 1 : 0);
    works.push_back(s.param_file->write_tile(tile, params));
  }
}

void StreamedUpdate::run(const StepArgs& args) {
  settle();  // the buffer sets are shared with update_group()
  const std::vector<Tile> all = tiles();
  for (ShardStorage& s : storage_) s.updated_in_backward = false;
  if (all.empty()) return;
  TilePipeline pipeline(options_.pipeline_read, options_.pipeline_write, ledger_.clock());
  ensure_buffer_sets(pipeline.sets());
  // The gradient comes from the tier with the states, or from host memory where it waited for
  // the global norm (ShardStorage::grad defined).
  auto arrays = [&](const Tile& t) {
    return storage_[t.group].grad.defined() ? arrays_ : arrays_ + 1;
  };
  pipeline.run(
      static_cast<int64_t>(all.size()),
      [&](int64_t i, int set, std::vector<std::shared_ptr<Work>>& works) {
    read(all[i], set, arrays(all[i]), works);
      },
      [&](int64_t i, int set) {
    const Tile& t = all[i];
    verify(t, set, arrays(t), args.step);
    const at::Tensor& in_memory = storage_[t.group].grad;
    update(t, set,
           in_memory.defined() ? in_memory.narrow(0, t.start, t.len)
                               : view_of(buffer(set, arrays_), t.len, at::kFloat),
           args);
  },
      [&](int64_t i, int set, std::vector<std::shared_ptr<Work>>& works) {
    write(all[i], set, works);
  });
}

void StreamedUpdate::update_group(int g, const at::Tensor& reduced, bool first,
                                  const StepArgs& args) {
  ShardStorage& s = storage_[g];
  if (!in_backward_) {
    in_backward_ = std::make_unique<TilePipeline>(options_.pipeline_read, options_.pipeline_write,
                                                  ledger_.clock());
  }
  ensure_buffer_sets(in_backward_->sets());
  std::vector<Tile> group;
  append_tiles(g, group);
  // Master and states; the partial sum of earlier micro steps too unless this is the first.
  const int64_t arrays = first ? arrays_ : arrays_ + 1;
  double sq = 0;
  in_backward_->run(
      static_cast<int64_t>(group.size()),
      [&](int64_t i, int set, std::vector<std::shared_ptr<Work>>& works) {
    read(group[i], set, arrays, works);
      },
      [&](int64_t i, int set) {
    const Tile& t = group[i];
    verify(t, set, arrays, args.step);
    const at::Tensor part = reduced.narrow(0, t.start, t.len);
    at::Tensor grad = view_of(buffer(set, arrays_), t.len, at::kFloat);
    if (first && part.scalar_type() == at::kFloat && part.is_cpu()) {
      grad = part;  // used where it is: no copy (the host kernel updates host tiles)
    } else if (first) {
      grad.copy_(part);
    } else {
      grad.add_(part.to(at::kCPU));
    }
    const double tile_sq = squared_sum(grad);
    if (!std::isfinite(tile_sq)) {
      throw NumericError(
          "a gradient of " + layout_.params[layout_.groups[g].params.front()].name +
          "'s group is not finite at step " + std::to_string(args.step) +
          "; with its optimizer states streamed from a file tier and neither clipping nor loss "
          "scaling, gradients go straight into the update during backward, so the step cannot "
          "be skipped. Lower the learning rate, check the data, or set zero.gradient_clipping "
          "(the step then waits for every gradient, and skips one that is not finite)");
    }
    sq += tile_sq;
    update(t, set, grad, args);
  },
      [&](int64_t i, int set, std::vector<std::shared_ptr<Work>>& works) {
    write(group[i], set, works);
  },
      /*settle_writes=*/false);
  s.grad_sq = sq;
  s.grad_nonfinite = false;
  s.grad_measured = true;
  s.updated_in_backward = true;
}

void StreamedUpdate::settle() {
  if (in_backward_) in_backward_->settle();
}

void StreamedUpdate::forget_backward_updates() {
  settle();
  for (ShardStorage& s : storage_) s.updated_in_backward = false;
}

}  // namespace zt
