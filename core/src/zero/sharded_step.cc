#include "zero/sharded_step.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <utility>

#include "zero/grad_squares.h"
#include "zero/weight_decay_runs.h"
#include "zt/error.h"
#include "zt/host/rank_agreement.h"

namespace zt {

namespace {

// The message of the exception being handled (call inside a catch).
std::string current_error_text() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

void copy_unless_same(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.device() != src.device() || dst.data_ptr() != src.data_ptr()) dst.copy_(src);
}

// Adds a group's squared gradient sum (inf or nan when a value is not finite) to `sum`, a
// double on the communicator's device: a gradient in compute memory is summed there, so a step
// reads its totals once, not once per group. A tier gradient was measured when its final value
// was written; it is read back only when that did not happen (a step after fewer micro steps
// than grad_accum).
void add_squared_sum(const at::Tensor& sum, ShardStorage& s, int64_t step) {
  if (s.grad.defined()) {
    sum.add_(squares_in_double(s.grad).sum().to(sum.device()));
    return;
  }
  if (s.grad_measured) {
    sum.add_(s.grad_nonfinite ? std::nan("") : s.grad_sq);
    return;
  }
  double sq = 0;
  s.grad_file->read_range(0, s.grad_file->bytes(), step,
                          [&](int64_t, const void* data, int64_t bytes) {
    const at::Tensor part = view_of(const_cast<void*>(data), bytes / 4, at::kFloat);
    sq += squared_sum(part);
  });
  sum.add_(sq);
}

}  // namespace

ShardedStep::ShardedStep(StepParts parts, StepOptions options)
    : parts_(std::move(parts)), options_(options) {}

double ShardedStep::divisor() const {
  return parts_.scaler.scale() * static_cast<double>(options_.grad_accum) * parts_.world /
         options_.predivide;
}

void ShardedStep::begin(double lr) {
  announced_lr_ = lr;
  tiers_checked_ = false;
  in_backward_ = false;
  updated_in_backward_ = false;
  if (options_.gradient_clipping > 0 || parts_.scaler.enabled()) return;
  for (const ShardStorage& s : parts_.storage) in_backward_ = in_backward_ || s.opt_streamed;
}

void ShardedStep::note_loss(const at::Tensor& loss, int micro) {
  if (parts_.scaler.enabled()) return;
  if (in_backward_) {
    const double value = loss.item<double>();
    if (std::isfinite(value)) return;
    throw loss_error("loss is " + std::to_string(value),
                     " (micro step " + std::to_string(micro + 1) + ")", /*step_dropped=*/false);
  }
  const at::Tensor value = loss.detach().clone().reshape({1});
  losses_.push_back({value, at::isfinite(value).logical_not(), micro});
}

NumericError ShardedStep::loss_error(const std::string& what, const std::string& where,
                                     bool step_dropped) const {
  return NumericError(what + " at step " + std::to_string(steps_ + 1) + where + " in " +
                      std::string(at::toString(options_.dtype)) + "; " +
                      (step_dropped ? "nothing of the step was applied: " : "") +
                      "lower the learning rate, enable zero.gradient_clipping, or check the data");
}

NumericError ShardedStep::nonfinite_loss(const std::vector<NotedLoss>& losses) {
  const NotedLoss* mine = nullptr;
  for (const NotedLoss& l : losses) {
    if (l.bad.item<bool>()) {
      mine = &l;
      break;
    }
  }
  // A rank whose loss was not finite, so that every other rank's error names it (the launcher
  // shows the first failing rank's, which may be any).
  const int bad_rank = highest_failed_rank(parts_.everyone, mine != nullptr);
  if (mine) {
    return loss_error("loss is " + std::to_string(mine->value.item<double>()),
                      " (micro step " + std::to_string(mine->micro + 1) + ")",
                      /*step_dropped=*/true);
  }
  return loss_error("the loss on rank " + std::to_string(bad_rank) + " is not finite",
                    " (this rank's were)", /*step_dropped=*/true);
}

NumericError ShardedStep::unscalable_overflow() const {
  const std::string dtype(at::toString(options_.dtype));
  const std::string why = parts_.scaler.enabled()
                              ? "with the loss scale at precision.min_scale (" +
                                    std::to_string(parts_.scaler.scale()) +
                                    "); a lower min_scale lets the scaler back off further"
                              : "in " + dtype + " without loss scaling, which could rescale them";
  return NumericError("gradients are not finite in two steps in a row (this one, after " +
                      std::to_string(steps_) +
                      " applied updates, and the one before; both skipped, nothing of them "
                      "applied), " +
                      why +
                      ": training on would skip every step. Lower the learning rate, check the "
                      "data (a batch that makes a log or a division blow up), or resume from an "
                      "earlier checkpoint");
}

bool ShardedStep::update_in_backward(int g, const at::Tensor& reduced, bool first) {
  // A poisoned step is skipped: its gradients go where they wait, not into an update.
  if (!in_backward_ || !parts_.storage[g].opt_streamed || poisoned_) return false;
  const int64_t step = steps_ + 1;
  if (!tiers_checked_) {
    check_tiers(step);
    tiers_checked_ = true;
  }
  updated_in_backward_ = true;
  try {
    parts_.streamed.update_group(g, reduced, first, {step, announced_lr_, divisor()});
  } catch (...) {
    mark_partly_applied("group " + std::to_string(g) + "'s update in backward of step " +
                        std::to_string(step) + " failed: " + current_error_text());
    throw;
  }
  return true;
}

void ShardedStep::mark_partly_applied(const std::string& why) {
  if (partly_applied_.empty()) partly_applied_ = why;
}

void ShardedStep::set_steps(int64_t steps, int64_t unscalable_in_a_row) {
  parts_.streamed.forget_backward_updates();
  steps_ = steps;
  poisoned_ = false;
  losses_.clear();
  in_backward_ = false;
  updated_in_backward_ = false;
  tiers_checked_ = false;
  unscalable_in_a_row_ = static_cast<int>(unscalable_in_a_row);
  partly_applied_.clear();
}

StepReport ShardedStep::run(double lr) {
  const bool updated_in_backward = updated_in_backward_;
  try {
    return run_step(lr);
  } catch (...) {
    // Whatever ends a step whose streamed groups took its update in backward (an overflow or a
    // failed backward found now, a tier that failed since) leaves the model partly applied.
    if (updated_in_backward) {
      mark_partly_applied(
          "groups streamed from a file tier took step " + std::to_string(steps_ + 1) +
          "'s update during backward, then the step failed: " + current_error_text());
    }
    throw;
  }
}

StepReport ShardedStep::run_step(double lr) {
  StepReport report;
  const double scale = parts_.scaler.scale();
  report.loss_scale = scale;
  // Gradients were summed over ranks and micro steps; average them and undo the scale.
  double divisor = this->divisor();
  const bool announced = in_backward_;
  // A backward that failed before its first streamed group was updated leaves nothing of the
  // step applied: it is skipped like any other.
  const bool updated_in_backward = updated_in_backward_;
  in_backward_ = false;
  updated_in_backward_ = false;
  if (announced && lr != announced_lr_) {
    throw InternalError("Engine::step(" + std::to_string(lr) + ") after begin_step(" +
                        std::to_string(announced_lr_) +
                        "): groups were already updated in backward at the announced rate");
  }
  const std::vector<NotedLoss> losses = std::exchange(losses_, {});
  const GradientTotals totals = measure_gradients(losses);
  if (totals.bad_loss) {
    // Without loss scaling nothing can rescale it: an error on every rank at once, and the
    // step's gradients are dropped, so a caller that goes on starts the next step afresh.
    unscalable_in_a_row_ = 0;
    zero_gradients();
    throw nonfinite_loss(losses);
  }
  // A step that overflowed has no norm: the finite groups' alone read as a plausible one.
  report.grad_norm = totals.overflow || totals.poisoned ? std::numeric_limits<double>::quiet_NaN()
                                                        : totals.norm / divisor;
  const bool skip = totals.overflow || totals.poisoned;
  if (skip && updated_in_backward) {
    // A group kept in memory (or on another rank) overflowed after streamed ones were updated.
    if (totals.overflow) {
      throw NumericError("a gradient is not finite at step " + std::to_string(steps_ + 1) +
                         " after groups streamed from a file tier were updated in backward, so "
                         "the step cannot be skipped. Lower the learning rate, check the data, "
                         "or set zero.gradient_clipping (the step then waits for every gradient, "
                         "and skips one that is not finite)");
    }
    // Not an overflow: a backward failed part way (its own error was thrown then), after
    // streamed groups took this step's update.
    throw InternalError("step " + std::to_string(steps_ + 1) +
                        " cannot be skipped after a backward that failed part way: groups "
                        "streamed from a file tier were already updated in it (Engine::"
                        "begin_step). Load the last checkpoint before training on; the "
                        "backward's own error says why it failed");
  }
  if (!skip) {
    // Before any state of the step changes (the scaler's count, the step number): a caller that
    // catches the IoError and saves must save the step before. After an update in backward the
    // streamed groups hold this step's values already: the tier's "not applied" is untrue then.
    try {
      check_tiers(steps_ + 1);
    } catch (const IoError& e) {
      if (!updated_in_backward) throw;
      throw IoError(std::string(e.what()) +
                    " (correction: groups streamed from the tier took "
                    "step " +
                    std::to_string(steps_ + 1) + "'s update during backward, so the " +
                    "step was partly applied; do not save from here: resume from the last "
                    "checkpoint)");
    }
    // A shard read ahead but not yet gathered is about to go stale.
    parts_.gatherer.drop_fetches(/*rethrow=*/true);
  }
  // An overflow nothing can rescale: one is a spike, skipped; a second in a row is not.
  if (totals.overflow && parts_.scaler.at_floor()) {
    if (++unscalable_in_a_row_ >= 2) {
      unscalable_in_a_row_ = 0;  // a caller that catches and goes on starts counting afresh
      zero_gradients();
      throw unscalable_overflow();
    }
  } else {
    unscalable_in_a_row_ = 0;
  }
  // A step skipped for a failed backward (poisoned) is no overflow: the scale stays.
  if (!totals.poisoned || totals.overflow) parts_.scaler.update(totals.overflow);
  if (skip) {
    report.skipped = true;
    report.step = steps_;
    zero_gradients();
    return report;
  }
  if (options_.gradient_clipping > 0) {
    const double coef = options_.gradient_clipping / (report.grad_norm + 1e-6);
    if (coef < 1) divisor /= coef;
  }
  ++steps_;
  try {
    update({steps_, lr, divisor});
  } catch (...) {
    // The groups in memory and the tiles before the failed one hold the new values, the rest
    // the old: no step's state. Said where a caller that catches it would otherwise save it.
    mark_partly_applied("step " + std::to_string(steps_) +
                        "'s update failed part way: " + current_error_text());
    try {
      throw;
    } catch (const IoError& e) {
      throw IoError(std::string(e.what()) + " (correction: step " + std::to_string(steps_) +
                    " was partly applied when this failed; do not save from here: resume "
                    "from the last checkpoint)");
    }
  }
  zero_gradients();
  report.step = steps_;
  return report;
}

ShardedStep::GradientTotals ShardedStep::measure_gradients(const std::vector<NotedLoss>& losses) {
  // {squared sum, poisoned, losses not finite}: squares are never negative, so the sum is finite
  // exactly where every gradient is, here and after the all-reduce (an overflow anywhere reaches
  // every rank).
  const at::Tensor totals = at::zeros({3},
                                      at::TensorOptions(at::kDouble).device(parts_.shard.device()));
  if (!losses.empty()) {
    std::vector<at::Tensor> bad;
    for (const NotedLoss& l : losses) bad.push_back(l.bad);
    totals.narrow(0, 2, 1).add_(at::cat(bad).sum().to(totals.device(), at::kDouble));
  }
  const at::Tensor sq = totals.narrow(0, 0, 1);
  // A poisoned rank's gradients in a file tier are not read: they may not have been written
  // this step, and reading them back failed their check as a tier changed under the job. Those
  // in memory are measured as on every rank (an overflow there must reach every loss scaler).
  for (auto& s : parts_.storage) {
    if (poisoned_ && !s.grad.defined() && !s.grad_measured) continue;
    add_squared_sum(sq, s, steps_ + 1);
  }
  const bool poisoned = poisoned_;
  poisoned_ = false;
  if (poisoned) totals.narrow(0, 1, 1).fill_(1.0);
  // Stage 0 shards are full copies: every rank already holds the global values. Otherwise the
  // shard group's shards cover the model once (every group holds the same reduced gradients).
  const bool over_shard_group = options_.stage >= 1;
  if (over_shard_group) {
    parts_.ledger.clock().wait(*parts_.shard.all_reduce(totals, ReduceOp::kSum),
                               &EngineTimes::comm_wait);
  }
  // The step's one read of its totals.
  const at::Tensor read = totals.to(at::kCPU);
  const double total_sq = read.data_ptr<double>()[0];
  bool overflowed = !std::isfinite(total_sq);
  bool poisoned_anywhere = read.data_ptr<double>()[1] > 0;
  const bool bad_loss = read.data_ptr<double>()[2] > 0;
  bool bad_loss_anywhere = bad_loss;
  // Gradients are the same on every rank, but a poisoned step is known to its own rank only
  // (and the overflow of what it left unread, to its own group): where the totals did not
  // travel over every rank, the others learn of both here, or they would update (or keep their
  // loss scale) while it skips, and the ranks' parameters part for good.
  const bool reached_everyone = over_shard_group && &parts_.shard == &parts_.everyone;
  if (!reached_everyone && parts_.everyone.size() > 1) {
    const at::Tensor flags = at::tensor({poisoned ? 1.0f : 0.0f, overflowed ? 1.0f : 0.0f,
                                         bad_loss ? 1.0f : 0.0f},
                                        at::kFloat)
                                 .to(parts_.everyone.device());
    parts_.ledger.clock().wait(*parts_.everyone.all_reduce(flags, ReduceOp::kMax),
                               &EngineTimes::comm_wait);
    const at::Tensor read_flags = flags.to(at::kCPU);
    poisoned_anywhere = poisoned_anywhere || read_flags.data_ptr<float>()[0] > 0;
    overflowed = overflowed || read_flags.data_ptr<float>()[1] > 0;
    bad_loss_anywhere = bad_loss_anywhere || read_flags.data_ptr<float>()[2] > 0;
  }
  return {std::sqrt(total_sq), overflowed, poisoned_anywhere, bad_loss_anywhere};
}

void ShardedStep::check_tiers(int64_t step) {
  for (OffloadTier* t : parts_.tiers) {
    t->set_step(step);
    t->check();
  }
}

void ShardedStep::update(const StepArgs& args) {
  std::vector<ShardTensors> shards;
  for (size_t gi = 0; gi < parts_.storage.size(); ++gi) {
    const ShardStorage& s = parts_.storage[gi];
    const ParamGroup& g = parts_.layout.groups[gi];
    if (!s.opt_streamed) {
      append_by_weight_decay(
          shards, {s.master, s.grad, s.states, {}, state_seed(static_cast<int>(gi), g.first, 0)}, g,
          g.first);
    }
  }
  {
    const EngineClock::Timer timer(parts_.ledger.clock(), &EngineTimes::optimizer);
    parts_.optimizer.step(shards, args);
  }
  parts_.streamed.run(args);
  refresh_parameters();
}

// Puts the updated master weights back into the parameters. All-gathers run asynchronously, at
// most allgather_bucket_mb of them in flight.
void ShardedStep::refresh_parameters() {
  std::vector<std::shared_ptr<Work>> works;
  EngineClock& clock = parts_.ledger.clock();
  int64_t in_flight = 0;
  const auto limit = static_cast<int64_t>(options_.allgather_bucket_mb * (1 << 20));
  auto gather = [&](const at::Tensor& flat, const at::Tensor& shard) {
    const auto bytes = static_cast<int64_t>(flat.nbytes());
    if (in_flight > 0 && in_flight + bytes > limit) {
      for (auto& w : works) clock.wait(*w, &EngineTimes::comm_wait);
      works.clear();
      in_flight = 0;
    }
    works.push_back(parts_.gather.all_gather(flat, shard));
    in_flight += bytes;
  };
  for (size_t gi = 0; gi < parts_.storage.size(); ++gi) {
    const ParamGroup& g = parts_.layout.groups[gi];
    ShardStorage& s = parts_.storage[gi];
    if (options_.stage == 0) {
      copy_unless_same(g.flat, s.master);
    } else if (options_.stage < 3) {
      const at::Tensor slot = g.flat.narrow(0, g.first, g.shard);
      if (!s.opt_streamed) copy_unless_same(slot, s.master);
      gather(g.flat, slot);
    } else {
      if (!s.opt_streamed) {
        if (s.param_streamed) {
          s.param_file->upload(s.master, options_.dtype);
        } else {
          copy_unless_same(s.param_shard, s.master);
        }
      }
      if (g.persistent) gather(g.flat, s.param_shard);
    }
  }
  for (auto& w : works) clock.wait(*w, &EngineTimes::comm_wait);
}

void ShardedStep::zero_gradients() {
  for (auto& s : parts_.storage) {
    if (s.grad.defined()) s.grad.zero_();
    s.grad_measured = false;
  }
}

}  // namespace zt
