#include "engine/engine_checkpoint.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <set>

#include "zt/error.h"

namespace zt {

namespace {

struct FlatRange {
  int64_t begin = 0, end = 0;
  bool empty() const { return begin >= end; }
  int64_t size() const { return end - begin; }
};

// The elements of group `g` this rank saves (see the header): an even split of the padded
// buffer, which is this rank's shard in stages 1-3.
// A group's elements this rank saves: its 1/k share when its shard group (all ranks when flat;
// stage 0 splits full copies the same way) is the first of the groups holding the same shards;
// nothing in the other groups (MiCS replicas), so each element is saved once.
FlatRange saved_range(const EngineParts& e, const ParamGroup& g) {
  if (e.replica_index > 0) return {0, 0};
  const int64_t share = g.padded / e.shard.size();
  return {share * e.shard.rank(), share * (e.shard.rank() + 1)};
}

// The part of `range` that is parameter `p`, in the parameter's own flattened index.
FlatRange param_part(const ParamSlot& p, FlatRange range) {
  const auto [lo, hi] = param_overlap(p, range.begin, range.end);
  return {lo - p.offset, hi - p.offset};
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A piece this rank declared: parameter `param`'s elements [part.begin, part.end).
struct Declared {
  int param;
  FlatRange part;
  int64_t index;  // the writer's
};

// Writes the parts of a streamed or in-memory run [begin, begin + count) that fall in each
// declared piece of one group and kind.
void write_run(CheckpointRankWriter& writer, const ModelLayout& layout,
               const std::vector<Declared>& pieces, int64_t begin, const float* data,
               int64_t count) {
  for (const Declared& d : pieces) {
    const int64_t offset = layout.params[d.param].offset;
    const int64_t lo = std::max(begin, offset + d.part.begin);
    const int64_t hi = std::min(begin + count, offset + d.part.end);
    if (lo < hi) writer.write(d.index, lo - offset - d.part.begin, data + (lo - begin), hi - lo);
  }
}

// Fills run [begin, begin + count) of group `g`'s array of `kind` (zeroed) from the reader.
void fill_run(const CheckpointReader& reader, const ModelLayout& layout, int g,
              const std::string& kind, int64_t begin, float* data, int64_t count) {
  for (int p : layout.groups[g].params) {
    const ParamSlot& slot = layout.params[p];
    const FlatRange part = param_part(slot, {begin, begin + count});
    if (!part.empty()) {
      reader.read(slot.name, kind, part.begin, part.end, data + (slot.offset + part.begin - begin));
    }
  }
}

// Same names, same shapes, nothing more: else the checkpoint is of another model.
void check_same_model(const ModelLayout& layout, const CheckpointReader& reader) {
  const std::string way_out = "; the checkpoint is of another model: check [model]";
  std::set<std::string> names;
  for (const ParamSlot& p : layout.params) {
    names.insert(p.name);
    const CheckpointTensor* t = reader.find_tensor(p.name);
    if (!t) {
      throw ConfigError("tensor " + p.name + " of this model is not in the checkpoint " +
                        reader.folder() + way_out);
    }
    const std::vector<int64_t>& mine = p.shape;
    if (t->shape != mine) {
      throw ConfigError("tensor " + p.name + " is " + shape_text(t->shape) + " in the checkpoint " +
                        reader.folder() + " but " + shape_text(mine) + " in this model" + way_out);
    }
  }
  for (const CheckpointTensor& t : reader.tensors()) {
    if (!names.count(t.name)) {
      throw ConfigError("tensor " + t.name + " of the checkpoint " + reader.folder() +
                        " is not in this model" + way_out);
    }
  }
}

void check_kinds(const Optimizer& optimizer, const CheckpointReader& reader) {
  const std::vector<std::string> saved = reader.kinds();
  for (const std::string& kind : checkpoint_kinds(optimizer)) {
    if (std::find(saved.begin(), saved.end(), kind) != saved.end()) continue;
    throw ConfigError("the checkpoint " + reader.folder() + " has no " +
                      (kind == "param" ? "fp32 parameters" : "optimizer state '" + kind + "'") +
                      " (it holds " + reader.kinds_text() +
                      "), which this run's optimizer (states " + joined(optimizer.state_names()) +
                      ") needs: resume with the optimizer that saved it (plugins.optimizer)");
  }
}

// The gradient codec's error feedback, one kind per rank and hop: each rank's residual is its own
// (what it has not yet delivered of its gradients), so it is saved by its rank and restored by
// the rank of the same number; a rank with none saved starts from zero, and so do elements of
// its shard that the saving rank did not hold (another world size or MiCS group size).
//   codec_residual.rank<r>         the reduce-scatter's: every element of every group
//   codec_residual_across.rank<r>  MiCS's all-reduce across the groups: this rank's shard
struct ResidualKind {
  std::string kind;
  bool across;
};

std::vector<ResidualKind> residual_kinds(const EngineParts& e) {
  std::vector<ResidualKind> out;
  if (e.layout.groups.empty()) return out;
  const std::string rank = std::to_string(e.comm.rank());
  if (e.reducer.residual(0).defined()) out.push_back({"codec_residual.rank" + rank, false});
  if (e.reducer.across_residual(0).defined())
    out.push_back({"codec_residual_across.rank" + rank, true});
  return out;
}

// The flat range of group g a residual kind covers, and the tensor holding it from its start.
FlatRange residual_range(const EngineParts& e, const ResidualKind& k, int g) {
  const ParamGroup& group = e.layout.groups[g];
  return k.across ? FlatRange{group.first, group.first + group.shard} : FlatRange{0, group.padded};
}

const at::Tensor& residual_of(const EngineParts& e, const ResidualKind& k, int g) {
  return k.across ? e.reducer.across_residual(g) : e.reducer.residual(g);
}

struct ResidualPiece {
  ResidualKind kind;
  int param;
  FlatRange part;  // in the parameter's own index
  int64_t index;   // the writer's
};

void declare_residuals(EngineParts& e, CheckpointRankWriter& writer,
                       std::vector<ResidualPiece>& pieces) {
  for (const ResidualKind& k : residual_kinds(e)) {
    for (size_t g = 0; g < e.layout.groups.size(); ++g) {
      for (int p : e.layout.groups[g].params) {
        const FlatRange part = param_part(e.layout.params[p], residual_range(e, k, g));
        if (part.empty()) continue;
        const int64_t index = writer.declare(
            {e.layout.params[p].name, k.kind, part.begin, part.end}, false);
        pieces.push_back({k, p, part, index});
      }
    }
  }
}

void write_residuals(EngineParts& e, CheckpointRankWriter& writer,
                     const std::vector<ResidualPiece>& pieces) {
  for (const ResidualPiece& d : pieces) {
    const ParamSlot& slot = e.layout.params[d.param];
    const int64_t begin = residual_range(e, d.kind, slot.group).begin;
    const float* base = residual_of(e, d.kind, slot.group).data_ptr<float>();
    writer.write(d.index, 0, base + (slot.offset + d.part.begin - begin), d.part.size());
  }
}

// What every gradient the codec saw was multiplied by: the loss scale (1 unless fp16's scaler
// runs) over the predivide factor (ModelLayout::take_flat_grads). Error feedback's residuals
// are in this unit.
double residual_unit(const EngineParts& e) { return e.scaler.scale() / e.predivide; }

void load_residuals(EngineParts& e, const CheckpointReader& reader) {
  const std::vector<std::string> saved = reader.kinds();
  for (const ResidualKind& k : residual_kinds(e)) {
    const bool mine = std::find(saved.begin(), saved.end(), k.kind) != saved.end();
    for (size_t g = 0; g < e.layout.groups.size(); ++g) {
      const at::Tensor& r = residual_of(e, k, static_cast<int>(g));
      r.zero_();
      if (!mine) continue;
      const FlatRange range = residual_range(e, k, static_cast<int>(g));
      for (int p : e.layout.groups[g].params) {
        const ParamSlot& slot = e.layout.params[p];
        const FlatRange part = param_part(slot, range);
        if (part.empty()) continue;
        float* at_begin = r.data_ptr<float>() + (slot.offset - range.begin);
        // An across residual covers the saving rank's shard: with another world size or MiCS
        // group size the shard's bounds moved, and elements it no longer saved start from zero.
        for (const auto& [lo, hi] : reader.saved_ranges(slot.name, k.kind, part.begin, part.end))
          reader.read(slot.name, k.kind, lo, hi, at_begin + lo);
      }
    }
  }
}

}  // namespace

// A streamed group's freshly loaded master run goes into the parameters here, as the streamed
// update does after a step: refresh_parameters() copies only groups held in memory.
void put_streamed_master(EngineParts& e, int gi, int64_t begin, float* data, int64_t count) {
  const ParamGroup& g = e.layout.groups[gi];
  ShardStorage& s = e.storage[gi];
  const at::Tensor master = view_of(data, count, at::kFloat);
  // The run is about to be rounded into a 16-bit master (ShardIo): the parameters get that
  // value, not the one before rounding, and the rounding then leaves the run as it is.
  if (e.optimizer.master_dtype() != at::kFloat) master.copy_(master.to(e.optimizer.master_dtype()));
  const int64_t local = begin - g.first;
  if (e.stage < 3) {
    g.flat.narrow(0, begin, count).copy_(master);
  } else if (!s.param_streamed) {
    s.param_shard.narrow(0, local, count).copy_(master);
  } else if (e.dtype == at::kFloat) {
    s.param_file->write_tile(local / e.tile_elements, data)->wait();
  } else {
    const auto bytes = static_cast<int64_t>(c10::elementSize(e.dtype)) * count;
    const StagingBuffer typed(*e.param_tier, bytes, e.ledger);
    view_of(typed.data(), count, e.dtype).copy_(master);
    s.param_file->write_tile(local / e.tile_elements, typed.data())->wait();
  }
}

std::string optimizer_dtype_name(at::ScalarType dtype) {
  return dtype == at::kBFloat16 ? "bf16" : "fp32";
}

std::vector<std::string> checkpoint_kinds(const Optimizer& optimizer) {
  std::vector<std::string> kinds{"param"};
  for (const auto& name : optimizer.state_names()) kinds.push_back(name);
  return kinds;
}

void save_engine_checkpoint(EngineParts& e, CheckpointRankWriter& writer) {
  if (!e.stepper.partly_applied().empty()) {
    throw ConfigError("cannot save a checkpoint: the model holds a step only partly applied (" +
                      e.stepper.partly_applied() +
                      "); load the last checkpoint, which replaces this state, and train on "
                      "from there");
  }
  const ModelLayout& layout = e.layout;
  for (const ParamSlot& p : layout.params) writer.add_tensor({p.name, p.shape});
  const std::vector<std::string> kinds = checkpoint_kinds(e.optimizer);
  // pieces[g][k]: what this rank saves of group g's kind k, in flat-offset order.
  std::vector<std::vector<std::vector<Declared>>> pieces(layout.groups.size());
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    const FlatRange range = saved_range(e, layout.groups[g]);
    pieces[g].resize(kinds.size());
    for (size_t k = 0; k < kinds.size(); ++k) {
      for (int p : layout.groups[g].params) {
        const FlatRange part = param_part(layout.params[p], range);
        if (part.empty()) continue;
        const int64_t index = writer.declare(
            {layout.params[p].name, kinds[k], part.begin, part.end}, e.storage[g].opt_streamed);
        pieces[g][k].push_back({p, part, index});
      }
    }
  }
  std::vector<ResidualPiece> residuals;
  declare_residuals(e, writer, residuals);
  writer.set_counters({e.stepper.steps(), e.scaler.saved_scale(), e.scaler.clean_steps(),
                       e.scaler.hysteresis_left(), optimizer_dtype_name(e.optimizer.state_dtype()),
                       optimizer_dtype_name(e.optimizer.master_dtype()), residual_unit(e),
                       e.stepper.unscalable_in_a_row()});
  writer.begin_data();
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    const FlatRange range = saved_range(e, layout.groups[g]);
    if (range.empty()) continue;
    for (size_t k = 0; k < kinds.size(); ++k) {
      e.io.read(static_cast<int>(g), static_cast<int64_t>(k), range.begin, range.end,
                e.stepper.steps(), [&](int64_t begin, const float* data, int64_t count) {
                  write_run(writer, layout, pieces[g][k], begin, data, count);
                });
    }
  }
  write_residuals(e, writer, residuals);
}

namespace {

// The load after its step count: the scaler, every group's kinds, the residuals, the
// parameters.
void load_state(EngineParts& e, const CheckpointReader& reader, const EngineCounters& c) {
  e.scaler.restore(c.loss_scale, c.clean_steps, c.hysteresis_left);  // checks them first
  // A shard read ahead from the parameter tier is about to go stale.
  e.gatherer.drop_fetches(/*rethrow=*/true);
  const std::vector<std::string> kinds = checkpoint_kinds(e.optimizer);
  for (size_t gi = 0; gi < e.layout.groups.size(); ++gi) {
    const int g = static_cast<int>(gi);
    for (size_t k = 0; k < kinds.size(); ++k) {
      e.io.rewrite(g, static_cast<int64_t>(k), [&](int64_t begin, float* data, int64_t count) {
        fill_run(reader, e.layout, g, kinds[k], begin, data, count);
        if (k == 0 && e.storage[gi].opt_streamed) put_streamed_master(e, g, begin, data, count);
      });
    }
  }
  load_residuals(e, reader);
  // Residuals saved under another loss scale or predivide factor, in this run's units. The same
  // unit leaves them untouched, so a resume under the same settings stays bit for bit.
  if (c.residual_unit > 0 && c.residual_unit != residual_unit(e)) {
    e.reducer.scale_residuals(residual_unit(e) / c.residual_unit);
  }
  e.stepper.refresh_parameters();
}

}  // namespace

void load_engine_checkpoint(EngineParts& e, const CheckpointReader& reader) {
  check_same_model(e.layout, reader);
  check_kinds(e.optimizer, reader);
  const EngineCounters c = reader.counters();
  // The step count first: it waits for an abandoned step's writes, whose failure then leaves
  // the scaler as it was.
  e.stepper.set_steps(c.optimizer_steps, c.unscalable_in_a_row);
  try {
    load_state(e, reader, c);
  } catch (...) {
    // The step count is the checkpoint's already, and some groups may be too: no state to save.
    e.stepper.mark_partly_applied("a load of " + reader.folder() + " failed part way");
    throw;
  }
}

}  // namespace zt
