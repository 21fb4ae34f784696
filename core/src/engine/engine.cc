// Engine: the wiring of one rank's ZeRO training. The pieces live in their own files:
//   model_layout     parameters as views into one flat buffer per group (the shard plan)
//   offload_placement which groups' states go to a tier (pure function of sizes and fractions)
//   shard_storage    a group's master, states, gradient and parameter shard, where placed
//   param_gatherer   stage 3: gather, prefetch, release, re-gather before backward
//   grad_reducer     gradients to shards: buckets, reduce-scatter / all-reduce, overlap
//   tier_gradients   gradient shards kept in a file tier beside the optimizer states
//   sharded_step     global norm, overflow, clipping, update, refresh of parameters
//   streamed_update  the update of shards in a file tier, tile by tile
//   memory_ledger    the bytes the engine owns, by category, and its clock (engine_clock)
//   shard_io         a group's master and states read or rewritten wherever they live
//   engine_checkpoint the pieces a rank saves, and a load from any saved layout
//   engine_accessors full fp32 parameter, gradient or optimizer state of one tensor
// This file builds them in order and runs the units forward and backward.
#include "zt/host/engine.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/ScopeExit.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "engine/engine_accessors.h"
#include "engine/engine_checkpoint.h"
#include "engine/engine_gathered.h"
#include "engine/engine_parts.h"
#include "util/fault_injection.h"
#include "zero/activation_checkpoint.h"
#include "zero/grad_reducer.h"
#include "zero/memory_ledger.h"
#include "zero/model_layout.h"
#include "zero/offload_placement.h"
#include "zero/param_gatherer.h"
#include "zero/scratch_buffers.h"
#include "zero/shard_io.h"
#include "zero/shard_storage.h"
#include "zero/sharded_step.h"
#include "zero/streamed_update.h"
#include "zero/weight_decay_runs.h"
#include "zero/zero_groups.h"
#include "zt/error.h"
#include "zt/host/trace.h"

namespace zt {

namespace {

void check_options(const EngineOptions& opt, const EngineTiers& tiers) {
  if (opt.stage < 0 || opt.stage > 3) throw ConfigError("zero.stage must be 0-3");
  if (opt.shard_group_size > 0 && opt.stage < 1) {
    throw ConfigError("zero.mics_shard_size = " + std::to_string(opt.shard_group_size) +
                      " needs zero.stage >= 1 (stage 0 shards nothing); raise zero.stage or "
                      "remove zero.mics_shard_size");
  }
  if (tiers.optimizer && opt.stage < 1) {
    throw ConfigError("plugins.offload_optimizer needs zero.stage >= 1 (stage is 0)");
  }
  if (tiers.param && opt.stage != 3) {
    throw ConfigError("plugins.offload_param needs zero.stage = 3 (stage is " +
                      std::to_string(opt.stage) + ")");
  }
}

// The options, once every communicator of `groups` is known to move tensors where the engine
// keeps its buffers (before any buffer is made).
const EngineOptions& on_device_of(const EngineOptions& opt, const ZeroGroups& groups) {
  groups.check_device(opt.device);
  return opt;
}

std::vector<OffloadTier*> distinct_tiers(const EngineTiers& tiers) {
  std::vector<OffloadTier*> out;
  for (OffloadTier* t : {tiers.optimizer, tiers.param}) {
    if (t && std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

}  // namespace

// Hands the engine unit `u` while it is built: an existing one, or one a ModelSource builds now.
using UnitBuilder = std::function<Unit*(int u)>;

ModelLayout layout_of_source(const ModelSource& source, const ShardStrategy& strategy, int world,
                             at::ScalarType dtype) {
  std::vector<std::string> labels;
  for (int64_t u = 0; u < source.unit_count(); ++u) labels.push_back("unit " + std::to_string(u));
  return ModelLayout(entries_of_source(source), labels, strategy, world,
                     static_cast<int64_t>(c10::elementSize(dtype)), source.seed());
}

// The shard groups of `comm` the options ask for. Collective (it may split `comm`).
std::unique_ptr<ZeroGroups> make_groups(Communicator& comm, const EngineOptions& options,
                                        const EngineTiers& tiers) {
  check_options(options, tiers);
  ZeroGroupOptions o;
  o.shard_size = options.shard_group_size;
  o.hierarchical_gather = options.hierarchical_params_gather;
  o.ranks_per_host = options.ranks_per_host;
  return std::make_unique<ZeroGroups>(comm, o);
}

struct Engine::Impl {
  std::unique_ptr<ZeroGroups> groups;  // first: every piece below uses its communicators
  std::vector<std::unique_ptr<Unit>> owned_units;  // built from a ModelSource
  std::vector<Unit*> units;                        // in call order, filled while building
  Communicator& comm;
  EngineOptions opt;
  std::vector<OffloadTier*> tiers;  // distinct tiers in use
  LossScaler scaler;
  MemoryLedger ledger;
  int64_t tile_elements = 1;         // streamed tile length, decided by build_storage
  std::string weight_decay_warning;  // mark_decay_free's, before `layout` is built
  ModelLayout layout;
  std::vector<ShardStorage> storage;  // per group
  ParamGatherer gatherer;
  GradReducer reducer;
  StreamedUpdate streamed;
  ShardedStep stepper;
  int64_t micro = 0;         // micro steps whose backward completed, since the last step()
  int64_t failed_micro = 0;  // and those whose backward failed (the step skips)
  // Every micro step since the last step(), failed ones too: what the caller has run.
  int64_t micro_steps_run() const { return micro + failed_micro; }
  // A forward the caller runs (begin_forward): open until backward() or end_forward().
  enum class Driven { kNone, kTraining, kEvaluation } driven = Driven::kNone;
  std::optional<EngineClock::Phase> driven_phase;  // times a driven micro step as a whole
  ShardIo io;
  EngineParts parts;  // what checkpoints and the debug accessors use
  // Last, so destroyed first: hooks on the caller's tensors see it gone (guarded_hook).
  std::shared_ptr<const bool> alive = std::make_shared<const bool>(true);

  Impl(std::unique_ptr<ZeroGroups> zero_groups, ModelLayout l, const UnitBuilder& build_unit,
       Optimizer& optimizer, EngineOptions options, EngineTiers t, EngineCodecs codecs)
      : groups(std::move(zero_groups)),
        comm(groups->world()),
        opt(on_device_of(options, *groups)),
        tiers(distinct_tiers(t)),
        scaler(options.scaler, options.dynamic_loss_scale),
        layout(with_decay_free(std::move(l), opt)),
        storage(build_storage(optimizer, t, build_unit)),
        gatherer(
            layout, storage, groups->gather(), t.param,
            {codecs.weights, opt.prefetch_units, opt.prefetch_elements, opt.max_live_parameters},
            ledger),
        reducer(layout, storage, {comm, groups->shard(), groups->replica()}, gatherer,
                {opt.stage, opt.compute_dtype, opt.gradient_predivide_factor, opt.overlap_comm,
                 opt.reduce_bucket_mb, opt.grad_accum, opt.pipeline_read, opt.pipeline_write,
                 codecs.gradients, codecs.gradients_across, opt.codec_error_feedback},
                ledger),
        streamed(
            layout, storage, optimizer, t.optimizer,
            {opt.stage, opt.compute_dtype, tile_elements, opt.pipeline_read, opt.pipeline_write},
            ledger),
        stepper({layout, storage, groups->shard(), groups->gather(), comm, comm.size(), optimizer,
                 scaler, gatherer, streamed, tiers, ledger},
                {opt.stage, opt.compute_dtype, opt.grad_accum, opt.gradient_predivide_factor,
                 opt.gradient_clipping, opt.allgather_bucket_mb}),
        io(layout, storage, t.optimizer, tile_elements, optimizer.master_dtype(),
           optimizer.state_dtype(), ledger),
        parts{layout,        storage, comm,      groups->shard(),   groups->replica_index(),
              optimizer,     scaler,  stepper,   gatherer,          io,
              ledger,        t.param, opt.stage, opt.compute_dtype, opt.gradient_predivide_factor,
              tile_elements, micro,   reducer} {
    reducer.set_final_gradient_sink([this](int g, const at::Tensor& reduced, bool first) {
      return stepper.update_in_backward(g, reduced, first);
    });
    ledger.fixed().unit_max_params = layout.largest_unit_bytes();
    // Only now, after the reducer made each parameter's gradient accumulator: autograd records
    // the shape it is made with, and a released parameter's is empty.
    if (opt.stage == 3) gatherer.release_all();
    ledger.restart_peak();
  }

  ModelLayout with_decay_free(ModelLayout l, const EngineOptions& o) {
    weight_decay_warning = mark_decay_free(
        l, o.no_weight_decay,
        o.no_weight_decay_place.empty() ? "zero.no_weight_decay" : o.no_weight_decay_place);
    return l;
  }

  // Decides what goes to a tier (a full disk fails here, before training), then builds the
  // units in order, each followed by its groups' flat buffers and shards: a unit's parameters
  // are sharded (and offloaded) before the next unit exists.
  std::vector<ShardStorage> build_storage(Optimizer& optimizer, const EngineTiers& t,
                                          const UnitBuilder& build_unit) {
    layout.size_shards(opt.stage >= 1, groups->shard().rank(), opt.stage == 3,
                       opt.param_persistence_threshold);
    const auto state_names = optimizer.state_names();
    std::vector<PlacementGroup> sizes;
    for (const auto& g : layout.groups) sizes.push_back({g.shard, g.persistent});
    PlacementRequest request;
    request.optimizer_tier = t.optimizer != nullptr;
    request.optimizer_fraction = opt.offload_optimizer_fraction;
    request.optimizer_arrays = 1 + static_cast<int64_t>(state_names.size());
    request.master_element_size = static_cast<int64_t>(c10::elementSize(optimizer.master_dtype()));
    request.state_element_size = static_cast<int64_t>(c10::elementSize(optimizer.state_dtype()));
    request.optimizer_alignment = t.optimizer ? t.optimizer->alignment() : 1;
    request.grads_in_tier = !streamed_gradients_in_memory(opt);
    request.param_tier = t.param != nullptr;
    request.param_fraction = opt.offload_param_fraction;
    request.param_alignment = t.param ? t.param->alignment() : 1;
    request.param_element_size = layout.element_size;
    request.sub_group_size = opt.sub_group_size;
    const OffloadPlacement placement = place_offload(sizes, request);
    tile_elements = placement.tile_elements;
    std::map<OffloadTier*, int64_t> need;
    if (placement.optimizer_tier_bytes > 0) need[t.optimizer] += placement.optimizer_tier_bytes;
    if (placement.param_tier_bytes > 0) need[t.param] += placement.param_tier_bytes;
    for (auto& [tier, bytes] : need) tier->prepare(bytes);
    StorageContext context{opt.stage,   opt.compute_dtype, state_names,  optimizer.state_dtype(),
                           t.optimizer, t.param,           tile_elements};
    context.master_dtype = optimizer.master_dtype();
    context.device = opt.device;
    context.streamed_grads_in_memory = streamed_gradients_in_memory(opt);
    std::vector<ShardStorage> out;
    for (size_t u = 0; u < layout.unit_groups.size(); ++u) {
      units.push_back(build_unit(static_cast<int>(u)));
      if (layout.from_declarations) layout.attach(static_cast<int>(u), *units.back());
      for (size_t g = out.size();
           g < layout.groups.size() && layout.groups[g].unit <= static_cast<int>(u); ++g) {
        out.push_back(build_shard_storage(layout, static_cast<int>(g),
                                          placement.optimizer_in_tier[g],
                                          placement.param_in_tier[g], context, ledger));
      }
    }
    return out;
  }

  // "" for a loss of one value; else its shape, for the refusal of forward_backward's and
  // backward()'s callers ("(undefined)" for none).
  static std::string shape_unless_one_value(const at::Tensor& loss) {
    if (loss.defined() && loss.numel() == 1) return "";
    return loss.defined() ? c10::str(loss.sizes()) : std::string("(undefined)");
  }

  // The loss times the scale, in fp32 whatever the loss's dtype: 2^16 and above is inf in fp16
  // (every step would overflow), as DeepSpeed scales loss.float().
  at::Tensor scaled(const at::Tensor& loss) const { return loss.to(at::kFloat) * scaler.scale(); }

  // One micro step too many before step(): the in-backward update already ran for streamed
  // groups, so its gradients would be lost there and applied to in-memory ones.
  void check_micro_room() const {
    if (micro_steps_run() < opt.grad_accum) return;
    throw InternalError("micro step " + std::to_string(micro_steps_run() + 1) + " of a step of " +
                        std::to_string(opt.grad_accum) +
                        " (data.grad_accum) without Engine::step(): call step() after every "
                        "grad_accum micro steps");
  }

  at::Tensor forward_backward(const at::Tensor& input,
                              const std::function<at::Tensor(const at::Tensor&)>& loss_fn) {
    check_micro_room();
    const EngineClock::Phase phase(ledger.clock(), &EngineTimes::forward_backward);
    const int64_t step_number = stepper.steps() + 1;
    for (OffloadTier* t : tiers) t->set_step(step_number);
    gatherer.set_step(step_number);
    reducer.begin_micro_step(step_number, micro);
    at::Tensor loss;
    try {
      {
        const trace::Scope span("forward");
        loss = loss_fn(run_units(input));
      }
      if (const std::string shape = shape_unless_one_value(loss); !shape.empty()) {
        // As backward() refuses it: a per-sample loss failed in LibTorch's words, as zt's bug.
        fail_backward();
        throw ConfigError("the model's loss has shape " + shape +
                          ", not one value: a loss function (a model plugin's loss()) returns "
                          "the micro batch's loss as one number; reduce it first (e.g. .mean())");
      }
      stepper.note_loss(loss, micro);  // read here only where streamed groups update in backward
    } catch (...) {
      // Nothing may stay gathered past a failure before backward: a step's update changes the
      // shards, and a group found gathered is not gathered again (the turn unit is kept for
      // backward).
      if (opt.stage == 3) gatherer.release_all();
      throw;
    }
    run_backward(loss);
    return loss.detach();
  }

  // The micro step's backward and its reductions; a failure there skips the step
  // (fail_backward). Stage 3's gathers are released either way.
  void run_backward(const at::Tensor& loss) {
    bool counted = false;
    try {
      {
        const trace::Scope span("backward");
        const BackwardSpans spans(*this);  // closes a unit's span the hooks opened, if any
        reducer.set_in_engine_backward(true);
        const auto clear = c10::make_scope_exit([this] { reducer.set_in_engine_backward(false); });
        scaled(loss).backward();
      }
      ++micro;
      counted = true;
      if (opt.stage >= 2) reducer.reduce_remaining();
      fold_micro_grads();
    } catch (...) {
      // A failed micro step counts all the same: every rank reaches the step() that skips it
      // after grad_accum micro steps, the failing one too (its peers' collectives wait there).
      // Apart from `micro`, which tells the reducer whether a group's first gradients are yet
      // to come (a tier tile the failed backward never wrote is overwritten, not read).
      if (!counted) ++failed_micro;
      fail_backward();
      throw;
    }
    if (opt.stage == 3) gatherer.release_all(/*keep_spares=*/true);
  }

  // A failed backward (the model's own backward code, a unit's) leaves no forward open, and its
  // partial gradients in no later step: the step it belongs to is skipped (a caller that goes
  // on calls step(), which skips it on every rank).
  void fail_backward() {
    drop_micro_step();
    release_forward();
  }

  // The micro step's gradients, partly reduced or not, go nowhere: the step is skipped.
  void drop_micro_step() {
    stepper.poison();
    try {
      reducer.abandon_micro_step();
    } catch (...) {
      // The backward's own error says more; this one (a reduction that failed too) is lost.
    }
  }

  // Stages 0-1 reduce at the step: a 16-bit job's micro steps are summed in fp32 meanwhile, as
  // stages 2-3 sum theirs. After each micro step's backward.
  void fold_micro_grads() {
    if (opt.stage < 2 && opt.compute_dtype != at::kFloat && opt.grad_accum > 1)
      layout.fold_grads_into_fp32();
  }

  // A unit's backward on the timeline: it starts when the gradient of the unit's output is
  // complete (the hook below) and ends when the next unit down starts, or backward returns. It
  // is on the lane of the thread that runs the hooks: the training thread's on the CPU,
  // LibTorch's autograd thread of the device on a GPU.
  trace::OpenSpan unit_backward;
  void enter_backward(int unit) {
    trace::end(unit_backward);
    unit_backward = trace::begin("unit", unit, "backward", trace::kCompute);
  }
  void leave_backward() { trace::end(unit_backward); }
  struct BackwardSpans {
    explicit BackwardSpans(Impl& impl) : impl_(impl) {}
    ~BackwardSpans() { impl_.leave_backward(); }
    Impl& impl_;
  };

  // Runs every unit in order. Stage 3 gathers each unit's groups before it runs, releases them
  // after, and hooks its output so backward gathers them again first.
  at::Tensor run_units(const at::Tensor& input) {
    at::Tensor x = input;
    for (size_t u = 0; u < units.size(); ++u) {
      const int ui = static_cast<int>(u);
      {
        const trace::Scope span("unit", ui, "forward", trace::kCompute);
        if (opt.stage == 3) gatherer.gather_unit(ui, +1);
        // Checkpointed, the unit keeps no activations, so the release below frees its
        // parameters outright (but the turn unit's, kept for backward); the hook re-gathers them
        // before the recompute, which runs in the unit's node.
        x = opt.activation_checkpointing ? checkpointed_forward(*units[u], x)
                                         : units[u]->forward(x);
      }
      if (opt.stage != 3) {
        // Only the timeline needs to know where a unit's backward starts outside stage 3.
        if (trace::recording() && x.requires_grad())
          x.register_hook(guarded_hook([this, ui] { enter_backward(ui); }));
        continue;
      }
      if (x.requires_grad()) {
        x.register_hook(guarded_hook([this, ui] {
          enter_backward(ui);
          // The gradient of this unit's output is complete, so the next unit's backward has
          // run: its parameters can go (a tied one is re-gathered when needed again).
          gatherer.release_after_backward(ui + 1, ui);
          gatherer.gather_unit(ui, -1);  // re-gather before this unit's backward runs
        }));
      }
      gatherer.release_after_forward(ui, /*backward_follows=*/true);
    }
    return x;
  }

  at::Tensor forward_eval(const at::Tensor& input) {
    if (micro_steps_run() != 0) {
      throw InternalError(
          "Engine::forward_eval between micro steps (" + std::to_string(micro_steps_run()) +
          " of " + std::to_string(opt.grad_accum) + " run): evaluate between optimizer steps");
    }
    const c10::NoGradGuard no_grad;
    const trace::Scope span("evaluate");
    gatherer.set_step(stepper.steps() + 1);
    at::Tensor x = input;
    for (size_t u = 0; u < units.size(); ++u) {
      const int ui = static_cast<int>(u);
      const trace::Scope unit_span("unit", ui, "evaluate", trace::kCompute);
      if (opt.stage == 3) gatherer.gather_unit(ui, +1);
      x = units[u]->forward(x);
      if (opt.stage == 3) gatherer.release_after_forward(ui);
    }
    if (opt.stage == 3) gatherer.release_all();
    return x;
  }

  void begin_forward(bool training) {
    if (driven != Driven::kNone) {
      throw InternalError("Engine::begin_forward while a driven forward is open: call backward() "
                          "or end_forward() first");
    }
    if (!training && micro_steps_run() != 0) {
      throw InternalError("an evaluation between micro steps (" +
                          std::to_string(micro_steps_run()) + " of " +
                          std::to_string(opt.grad_accum) + " run): evaluate between steps");
    }
    if (training) check_micro_room();
    if (training && opt.activation_checkpointing) {
      throw ConfigError("model.activation_checkpointing recomputes units the engine runs itself; "
                        "a model that runs its own forward checkpoints its own activations "
                        "(torch.utils.checkpoint): set it to false");
    }
    const int64_t step_number = stepper.steps() + 1;
    gatherer.set_step(step_number);
    if (training) {
      driven_phase.emplace(ledger.clock(), &EngineTimes::forward_backward);
      for (OffloadTier* t : tiers) t->set_step(step_number);
      reducer.begin_micro_step(step_number, micro);
    }
    driven = training ? Driven::kTraining : Driven::kEvaluation;
  }

  // A hook on a tensor the caller keeps: a backward through it may run after the engine is
  // gone (outputs of a closed Python engine), and then it says so instead of using freed memory.
  template <typename Fn>
  std::function<at::Tensor(const at::Tensor&)> guarded_hook(Fn fn) const {
    return [token = std::weak_ptr<const bool>(alive), fn](const at::Tensor& grad) {
      if (token.expired()) {
        throw ConfigError("backward through the outputs of a zt engine that was closed: run the "
                          "forward again (a closed engine's module is plain PyTorch again)");
      }
      fn();
      return grad;
    };
  }

  void check_driven_unit(int u, const char* call) const {
    if (driven == Driven::kNone) {
      throw InternalError(std::string("Engine::") + call + " outside begin_forward()");
    }
    if (u < 0 || u >= static_cast<int>(units.size())) {
      throw InternalError(std::string("Engine::") + call + ": no unit " + std::to_string(u) +
                          " (the model has " + std::to_string(units.size()) + ")");
    }
  }

  void enter_unit(int u) {
    check_driven_unit(u, "enter_unit");
    // Inside the loss's backward a unit entered is a forward recomputed for it (PyTorch's
    // non-reentrant checkpoint): what it prefetches is the backward's next units.
    if (opt.stage == 3) gatherer.gather_unit(u, reducer.in_engine_backward() ? -1 : +1);
  }

  // The unit's outputs carry a hook that gathers its groups again before its backward; its
  // groups are released in backward as soon as their gradients are taken (GradReducer), which
  // needs no order between units, so a forward that is not a chain works as well.
  void leave_unit(int u, const std::vector<at::Tensor>& outputs) {
    check_driven_unit(u, "leave_unit");
    if (opt.stage != 3) return;
    for (const at::Tensor& out : outputs) {
      if (!out.defined() || !out.requires_grad()) continue;
      at::Tensor x = out;
      x.register_hook(guarded_hook([this, u] { gatherer.gather_unit(u, -1); }));
    }
    // A forward recomputed in backward keeps its groups: the backward that follows at once
    // reads them through the saved tensors (released there, they were read as empty storage),
    // and the reducer releases each group as its gradients are taken.
    if (!reducer.in_engine_backward()) gatherer.release_after_forward(u);
  }

  at::Tensor backward(const at::Tensor& loss) {
    if (driven != Driven::kTraining) {
      throw InternalError("Engine::backward without a training begin_forward()");
    }
    if (const std::string shape = shape_unless_one_value(loss); !shape.empty()) {
      abort_forward();
      throw ConfigError("backward takes the loss as one value; this one has shape " + shape +
                        ": reduce it first (e.g. loss.mean())");
    }
    try {
      stepper.note_loss(loss, micro);
    } catch (...) {
      abort_forward();
      throw;
    }
    run_backward(loss);
    driven = Driven::kNone;
    driven_phase.reset();
    return loss.detach();
  }

  void end_forward() {
    if (driven != Driven::kEvaluation) {
      throw InternalError("Engine::end_forward without an evaluation begin_forward()");
    }
    if (opt.stage == 3) gatherer.release_all();
    driven = Driven::kNone;
  }

  // A backward that ran outside backward() (a plain loss.backward() from Python) reached the
  // reducer: its gradients wait in .grad (stages 0-1) or were partly summed into the shards
  // (stages 2-3), where the micro step done again would count them twice. The step is skipped,
  // as after a failed backward.
  void abort_forward() {
    if (driven == Driven::kTraining && reducer.gradients_arrived()) drop_micro_step();
    release_forward();
  }

  void release_forward() {
    if (opt.stage == 3) gatherer.release_all();
    driven = Driven::kNone;
    driven_phase.reset();
  }

  StepReport step(double lr) {
    const EngineClock::Phase phase(ledger.clock(), &EngineTimes::step);
    // A micro step that failed between its forward and its backward may have left the turn
    // unit gathered: the update below makes those values stale.
    if (opt.stage == 3) gatherer.release_all(/*keep_spares=*/true);
    if (opt.stage < 2) reducer.reduce_remaining();
    micro = 0;
    failed_micro = 0;
    const double scale = scaler.scale();
    StepReport report;
    try {
      report = stepper.run(lr);
    } catch (const NumericError&) {
      // A loss that was not finite, or a second overflow in a row that nothing could rescale:
      // the step's gradients were dropped, and the residuals they fed go with them, as for a
      // skipped step. (The other NumericError, a gradient that was not finite after an update
      // in backward, ends the job: its residuals do not matter.)
      reducer.scale_residuals(0);
      throw;
    }
    // Error feedback's residuals are in loss-scaled units (GradReducer::scale_residuals).
    if (report.skipped) {
      reducer.scale_residuals(0);
    } else if (scaler.scale() != scale) {
      reducer.scale_residuals(scaler.scale() / scale);
    }
    return report;
  }

  std::vector<std::pair<std::string, at::Tensor>> full_parameters() {
    std::vector<std::pair<std::string, at::Tensor>> out;
    gatherer.set_step(stepper.steps() + 1);
    // The weights as trained, not as a weight codec sends them. Coded again whatever throws: a
    // caller that goes on after the error would otherwise gather exactly on this rank alone,
    // while its peers send encoded bytes.
    gatherer.set_exact(true);
    const struct CodedAgainOnExit {
      ParamGatherer& gatherer;
      ~CodedAgainOnExit() { gatherer.set_exact(false); }
    } coded_again{gatherer};
    for (size_t gi = 0; gi < layout.groups.size(); ++gi) {
      const int g = static_cast<int>(gi);
      const bool was = gatherer.gathered(g);
      gatherer.ensure_gathered(g);
      for (int p : layout.groups[gi].params) {
        out.emplace_back(layout.params[p].name,
                         layout.params[p].tensor.detach().to(at::kCPU, at::kFloat, false,
                                                             /*copy=*/true));
      }
      if (!was) gatherer.release(g);
    }
    return out;
  }
};

Engine::Engine(std::vector<Unit*> units, Communicator& comm, const ShardStrategy& strategy,
               Optimizer& optimizer, EngineOptions options, EngineTiers tiers,
               EngineCodecs codecs) {
  auto groups = make_groups(comm, options, tiers);
  ModelLayout layout(units, strategy, groups->shard().size(),
                     static_cast<int64_t>(c10::elementSize(options.compute_dtype)));
  impl_ = std::make_unique<Impl>(
      std::move(groups), std::move(layout), [&units](int u) { return units[u]; }, optimizer,
      options, tiers, codecs);
}

Engine::Engine(ModelSource& source, Communicator& comm, const ShardStrategy& strategy,
               Optimizer& optimizer, EngineOptions options, EngineTiers tiers,
               EngineCodecs codecs) {
  auto groups = make_groups(comm, options, tiers);
  ModelLayout layout = layout_of_source(source, strategy, groups->shard().size(),
                                        options.compute_dtype);
  std::vector<std::unique_ptr<Unit>> built;
  // Unit u is built just before its groups are, so its parameters are sharded before the
  // next unit exists.
  auto build = [&](int u) -> Unit* {
    built.push_back(source.build(u));
    return built.back().get();
  };
  impl_ = std::make_unique<Impl>(std::move(groups), std::move(layout), build, optimizer, options,
                                 tiers, codecs);
  impl_->owned_units = std::move(built);
}

Engine::~Engine() {
  // The pool keeps this engine's flat gradients and norm buffers between steps: sized for its
  // groups, they would stay with the process (Python's close(), then another engine) and count
  // in the next one's memory. Those still lent (a member's pending op) go at a later drop.
  ScratchBuffers::process().drop_free();
}

void Engine::begin_step(double lr) {
  sleep_if_slow_step_injected();  // a test's fault (ZT_TEST_FAULT), nothing otherwise
  impl_->stepper.begin(lr);
}

at::Tensor Engine::forward_backward(const at::Tensor& input,
                                    const std::function<at::Tensor(const at::Tensor&)>& loss_fn) {
  return impl_->forward_backward(input, loss_fn);
}

at::Tensor Engine::forward_eval(const at::Tensor& input) { return impl_->forward_eval(input); }

void Engine::begin_forward(bool training) { impl_->begin_forward(training); }
void Engine::enter_unit(int unit) { impl_->enter_unit(unit); }
void Engine::leave_unit(int unit, const std::vector<at::Tensor>& outputs) {
  impl_->leave_unit(unit, outputs);
}
at::Tensor Engine::backward(const at::Tensor& loss) { return impl_->backward(loss); }
void Engine::end_forward() { impl_->end_forward(); }
void Engine::abort_forward() { impl_->abort_forward(); }

StepReport Engine::step(double lr) { return impl_->step(lr); }

std::vector<std::pair<std::string, at::Tensor>> Engine::full_parameters() {
  return impl_->full_parameters();
}

void Engine::save_checkpoint(CheckpointRankWriter& writer) {
  save_engine_checkpoint(impl_->parts, writer);
}

void Engine::load_checkpoint(const CheckpointReader& reader) {
  // Nothing gathered may outlive the load: a group found gathered is not gathered again, and the
  // load refreshes only the persistent ones.
  if (impl_->opt.stage == 3) impl_->gatherer.release_all(/*keep_spares=*/true);
  load_engine_checkpoint(impl_->parts, reader);
}

at::Tensor Engine::full_fp32_param(const std::string& name) {
  return full_array(impl_->parts, parameter_index(impl_->layout, name), 0);
}

at::Tensor Engine::full_fp32_grad(const std::string& name) {
  return full_gradient(impl_->parts, parameter_index(impl_->layout, name));
}

at::Tensor Engine::full_optimizer_state(const std::string& name, const std::string& state) {
  const int p = parameter_index(impl_->layout, name);
  return full_array(impl_->parts, p, state_index(impl_->parts.optimizer, state));
}

std::vector<std::string> Engine::parameter_names() const {
  std::vector<std::string> names;
  for (const auto& p : impl_->layout.params) names.push_back(p.name);
  return names;
}

const std::string& Engine::weight_decay_warning() const { return impl_->weight_decay_warning; }

std::vector<std::string> Engine::decay_free_parameter_names() const {
  std::vector<std::string> names;
  for (const auto& p : impl_->layout.params) {
    if (exempt_from_weight_decay(p.name, impl_->opt.no_weight_decay)) names.push_back(p.name);
  }
  return names;
}

MemoryReport Engine::memory() const { return impl_->ledger.report(); }

std::string Engine::describe_sharding() const { return impl_->groups->describe(); }

std::vector<std::pair<std::string, CommStats>> Engine::group_comm_stats() const {
  return impl_->groups->split_stats();
}

EngineTimes Engine::times() const { return impl_->ledger.clock().times(); }

int64_t Engine::optimizer_steps() const { return impl_->stepper.steps(); }
int64_t Engine::micro_steps() const { return impl_->micro_steps_run(); }

int64_t Engine::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : impl_->layout.params) n += p.numel;
  return n;
}

void Engine::with_gathered_parameters(const std::vector<std::string>& names, int modifier_rank,
                                      const GatheredFn& fn) {
  zt::with_gathered_parameters(impl_->parts, names, modifier_rank, fn);
}

}  // namespace zt
