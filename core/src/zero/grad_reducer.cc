#include "zero/grad_reducer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>

#include "zero/coded_collectives.h"
#include "zero/param_gatherer.h"
#include "zt/error.h"
#include "zt/host/trace.h"

namespace zt {

namespace {

// Calls `fn` after autograd accumulated a parameter's gradient into .grad.
class AfterAccumulate final : public torch::autograd::FunctionPostHook {
 public:
  explicit AfterAccumulate(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

}  // namespace

GradReducer::GradReducer(ModelLayout& layout, std::vector<ShardStorage>& storage, ReduceComms comms,
                         ParamGatherer& gatherer, ReduceOptions options, MemoryLedger& ledger)
    : layout_(layout),
      storage_(storage),
      comms_(comms),
      gatherer_(gatherer),
      options_(options),
      ledger_(ledger),
      tier_grads_(storage, ledger, options.pipeline_read, options.pipeline_write),
      ready_(layout.groups.size(), 0),
      arrived_(layout.params.size(), 0),
      reduced_(layout.groups.size(), false),
      residuals_(layout.groups.size()),
      across_residuals_(layout.groups.size()),
      out_of_turn_(layout.groups.size(), 0),
      late_left_(layout.groups.size(), 0),
      turn_(static_cast<int>(layout.groups.size()) - 1) {
  for (size_t g = 0; g < layout_.groups.size() && options_.error_feedback; ++g) {
    if (options_.codec) residuals_[g] = at::zeros({layout_.groups[g].padded}, at::kFloat);
    if (options_.across_codec && comms_.replica) {
      const int replicas = comms_.replica->size();
      const int64_t shard = layout_.groups[g].shard;
      across_residuals_[g] = at::zeros({padded_shard_numel(shard, replicas) * replicas},
                                       at::kFloat);
    }
    for (const at::Tensor& r : {residuals_[g], across_residuals_[g]})
      if (r.defined()) ledger_.fixed().codec_residuals += static_cast<int64_t>(r.nbytes());
  }
  for (size_t p = 0; p < layout_.params.size(); ++p) {
    const ParamSlot& param = layout_.params[p];
    auto accumulator = torch::autograd::impl::grad_accumulator(param.tensor);
    if (!accumulator) {
      throw InternalError("parameter " + param.name +
                          " does not require grad; the engine trains every "
                          "parameter a unit lists");
    }
    const int index = static_cast<int>(p);
    hook_keys_.push_back(accumulator->add_post_hook(
        std::make_unique<AfterAccumulate>([this, index] { on_grad_ready(index); })));
    accumulators_.push_back(std::move(accumulator));
  }
}

GradReducer::~GradReducer() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

void GradReducer::begin_micro_step(int64_t step, int64_t index) {
  step_ = step;
  micro_ = index;
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(arrived_.begin(), arrived_.end(), 0);
  std::fill(reduced_.begin(), reduced_.end(), false);
  turn_ = static_cast<int>(layout_.groups.size()) - 1;
  std::fill(out_of_turn_.begin(), out_of_turn_.end(), 0);
  agreed_ = false;
  any_arrived_ = false;
  arrived_outside_ = false;
}

// A parameter's gradient arrives once per backward, after autograd summed its uses, except
// through a nested backward of its own: PyTorch's reentrant torch.utils.checkpoint (1.13's
// default) runs one per checkpointed call. Stages 0-1 reduce .grad whole at the step, which sums
// any number of arrivals; stages 2-3 reduce a group once all its parameters arrived, so an
// arrival counts once, and one after its group was reduced would be lost (or left for the next
// step): refused.
void GradReducer::on_grad_ready(int p) {
  any_arrived_ = true;
  if (!in_engine_backward_) arrived_outside_ = true;
  if (options_.stage < 2) return;
  const int g = layout_.params[p].group;
  // Stage 2 may hold a complete group until its turn: a gradient that came from outside the
  // engine's backward is refused when the engine's own comes, reduced or not (summed unscaled
  // into a loss-scaled gradient, it would be wrong without a word).
  // A complete group counts as sent: whether stage 2 sent it yet depends on the groups after it,
  // which may differ between ranks, and the refusals below must not.
  const bool taken = reduced_[g] || complete(g);
  if (in_engine_backward_ && ((taken && arrived_outside_) || arrived_[p] == kArrivedOutside)) {
    throw ConfigError(
        "the gradient of parameter " + layout_.params[p].name +
        " arrived a second time in one micro step at ZeRO stage " + std::to_string(options_.stage) +
        ": a backward before engine.backward (an auxiliary loss's loss.backward(retain_graph="
        "True)) already gave its gradient, which stages 2-3 reduce as gradients arrive; add the "
        "losses and call engine.backward once (engine.backward(loss + aux_loss)), or train at "
        "zero.stage 0-1, which sum such backward passes");
  }
  if (taken && !in_engine_backward_) {
    // Autograd has written it into .grad already: dropped, or the next micro step's backward
    // would add to it and reduce it with its own (the caller may catch this and go on).
    layout_.params[p].tensor.mutable_grad() = at::Tensor();
    throw ConfigError(
        "the gradient of parameter " + layout_.params[p].name +
        " arrived after engine.backward had reduced its group at ZeRO stage " +
        std::to_string(options_.stage) +
        ": a backward after engine.backward (an auxiliary loss's loss.backward()) comes too "
        "late for stages 2-3, which reduce gradients as they arrive; add the losses and call "
        "engine.backward once (engine.backward(loss + aux_loss)), or train at zero.stage 0-1");
  }
  if (taken) {
    throw ConfigError(
        "the gradient of parameter " + layout_.params[p].name +
        " arrived a second time in one backward, after its group's gradients were complete at "
        "ZeRO stage " +
        std::to_string(options_.stage) +
        ": a module run more than once under PyTorch's reentrant checkpointing "
        "(torch.utils.checkpoint with use_reentrant=True, PyTorch 1.13's default) has a backward "
        "pass per call, and the later one would be lost; pass use_reentrant=False, checkpoint "
        "the module once, or train at zero.stage 0-1");
  }
  if (arrived_[p]) return;
  arrived_[p] = in_engine_backward_ ? kArrivedInside : kArrivedOutside;
  if (++ready_[g] == static_cast<int>(layout_.groups[g].params.size())) {
    if (options_.stage == 3) {
      reduce_group(g);
    } else {
      // Complete after the group next in its turn (a module registered after the ones it feeds,
      // whose gradient comes late): in turn, it held that one back; late, it stays late. (A
      // group not in turn completes behind the one that is, and holds nothing back.)
      if (g == turn_ || late(g)) {
        int next = g - 1;
        while (next >= 0 && late(next)) --next;
        if (next >= 0 && (complete(next) || reduced_[next])) out_of_turn_[g] = 1;
      }
      reduce_in_turn();
    }
  }
}

bool GradReducer::complete(int g) const {
  return ready_[g] == static_cast<int>(layout_.groups[g].params.size());
}

void GradReducer::reduce_in_turn() {
  for (; turn_ >= 0; --turn_) {
    if (late(turn_)) continue;  // sent at the end of backward
    if (!complete(turn_)) return;
    reduce_group(turn_);
  }
}

// Every rank learns which groups missed a gradient, or completed after a group before them, on
// any rank (one all-reduce of a flag per group): the next micro step sends them after the others,
// instead of holding back every group before them (with their gradients) until its backward
// ends. After this micro step's last reduction was issued, so that it is the same op on every
// rank, whichever of them its hooks sent.
void GradReducer::agree_on_late_groups() {
  const int groups = static_cast<int>(layout_.groups.size());
  at::Tensor flags = at::zeros({groups}, at::kFloat);
  float* flag = flags.data_ptr<float>();
  // 2: a parameter of it got no gradient (the user's to know); 1: it completed out of turn.
  for (int g = 0; g < groups; ++g) flag[g] = !complete(g) ? 2.0f : out_of_turn_[g] ? 1.0f : 0.0f;
  if (comms_.world.size() > 1) all_reduce_host(comms_.world, flags, ReduceOp::kMax);
  for (int g = 0; g < groups; ++g) {
    if (flag[g] > 1 && !noted_late_ && comms_.world.rank() == 0) {
      noted_late_ = true;
      std::fprintf(stderr,
                   "zt: note: the group of parameter %s got no gradient on some rank in step "
                   "%lld (a forward that did not use it there; its gradient counts as 0): ZeRO "
                   "stage 2 sends the groups in one order on every rank, and from the next micro "
                   "step on sends such groups after the others; said once\n",
                   layout_.params[layout_.groups[g].params.front()].name.c_str(),
                   static_cast<long long>(step_));
    }
    // Late for a while once flagged: a group an expert's routing skips now and then came back
    // in turn at its first clean micro step and held everything before it at the next skip.
    if (flag[g] > 0) {
      late_left_[g] = kLateMicroSteps;
    } else if (late_left_[g] > 0) {
      --late_left_[g];
    }
  }
}

void GradReducer::send_rest_in_turn() {
  if (agreed_) return;
  const int groups = static_cast<int>(layout_.groups.size());
  // The order every rank keeps, whichever groups its hooks sent: the others last to first,
  // then the late ones last to first; then the agreement, the same op on every rank.
  for (int g = groups - 1; g >= 0; --g)
    if (!late(g)) reduce_group(g);
  for (int g = groups - 1; g >= 0; --g)
    if (late(g)) reduce_group(g);
  turn_ = -1;
  agreed_ = true;  // before the collective: one that failed is not issued again
  agree_on_late_groups();
}

void GradReducer::reduce_group(int gi) {
  if (reduced_[gi]) return;
  reduced_[gi] = true;
  // Stage 2 sends a group from a hook inside a unit's backward on one rank and after backward on
  // another: its collectives' issuing phase (launch.check_collectives compares it) is this span's.
  std::optional<trace::Scope> span;
  if (options_.stage == 2) span.emplace("gradient reduction");
  const ParamGroup& g = layout_.groups[gi];
  at::Tensor flat = layout_.take_flat_grads(gi, options_.dtype, options_.predivide);
  if (options_.stage == 3) gatherer_.release(gi);
  Pending r{gi, {}, nullptr, g.padded * layout_.element_size};
  if (options_.stage == 0) {
    r.out = flat;
    r.work = comms_.world.all_reduce(flat, ReduceOp::kSum);
  } else {
    r.out = at::empty({g.shard}, flat.options());
    r.work = options_.codec ? coded_reduce_scatter(comms_.shard, *options_.codec, r.out, flat,
                                                   ReduceOp::kSum, residuals_[gi])
                            : comms_.shard.reduce_scatter(r.out, flat, ReduceOp::kSum);
  }
  pending_.push_back(std::move(r));
  // MiCS: the group reduced before this one goes across the groups now, while backward goes on
  // (waiting for its reduce-scatter, issued a group's backward ago). Decided by position, not by
  // which op happened to finish, so every rank issues the same ops in the same order.
  if (options_.overlap_comm && pending_.size() > 1) start_across(pending_.size() - 1);
  // Bound the gradient bytes in flight (reduce_bucket_mb); without overlap, wait at once.
  int64_t in_flight = 0;
  for (const auto& q : pending_) in_flight += q.bytes;
  if (!options_.overlap_comm || in_flight > static_cast<int64_t>(options_.bucket_mb * (1 << 20)))
    drain();
}

// Each group's partial sums of a shard, summed across the groups that hold it (the shard group
// reduced them within the group).
void GradReducer::start_across(size_t upto) {
  if (options_.stage < 1 || !comms_.replica) return;
  for (size_t i = 0; i < upto; ++i) {
    Pending& r = pending_[i];
    if (r.across) continue;
    ledger_.clock().wait(*r.work, &EngineTimes::comm_wait);
    r.work = options_.across_codec ? coded_all_reduce(*comms_.replica, *options_.across_codec,
                                                      r.out, across_residuals_[r.group])
                                   : comms_.replica->all_reduce(r.out, ReduceOp::kSum);
    r.across = true;
  }
}

void GradReducer::drain() {
  start_across(pending_.size());
  for (auto& r : pending_) {
    ledger_.clock().wait(*r.work, &EngineTimes::comm_wait);
    accumulate(r);
  }
  pending_.clear();
}

// Stages 0-1 reduce once per step, at the step: that reduction is the first and the last.
void GradReducer::accumulate(const Pending& r) {
  ShardStorage& s = storage_[r.group];
  if (s.grad.defined()) {
    // A tier group's gradient waits in host memory, next to its states, whatever the device of
    // the reduction (ZeRO-Offload: copied to the host as it is reduced).
    s.grad.add_(r.out.to(s.grad.device(), at::kFloat));
    return;
  }
  const bool once = options_.stage < 2;
  const bool first = once || micro_ == 0, last = once || micro_ == options_.grad_accum - 1;
  if (last && sink_ && sink_(r.group, r.out, first)) return;
  tier_grads_.add(r.group, r.out, first, last, step_);
}

void GradReducer::reduce_remaining() {
  const int groups = static_cast<int>(layout_.groups.size());
  if (options_.stage == 2) send_rest_in_turn();
  for (int g = 0; g < groups; ++g) reduce_group(g);
  drain();
  tier_grads_.settle();
}

// The micro step's own .grad only: the fp32 sums of the finished ones (grad_sum) stay.
void GradReducer::abandon_micro_step() {
  // Stage 2: the ranks' hooks sent different groups (a branch on the batch), and a backward
  // that failed on every rank, or on one, must still leave them at the same collective: the
  // rest go as reduce_remaining sends them (their values go nowhere: the step is skipped).
  if (options_.stage == 2) {
    try {
      send_rest_in_turn();
    } catch (...) {
      // The backward's own error says more; what was issued is waited for below.
    }
  }
  drain();
  tier_grads_.settle();
  for (ParamSlot& p : layout_.params) {
    if (p.tensor.defined() && p.tensor.grad().defined()) p.tensor.mutable_grad().reset();
  }
}

void GradReducer::scale_residuals(double factor) {
  for (std::vector<at::Tensor>* kind : {&residuals_, &across_residuals_}) {
    for (at::Tensor& r : *kind) {
      if (!r.defined()) continue;
      if (factor == 0) {
        r.zero_();  // not a product: an inf or NaN residual times 0 stays NaN
      } else {
        r.mul_(factor);
      }
    }
  }
}

}  // namespace zt
