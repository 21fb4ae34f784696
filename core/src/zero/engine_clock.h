// EngineClock: where one rank's time goes (EngineTimes). forward_backward() and step() are timed
// as a whole (a Phase each); inside them the optimizer's kernel calls and every wait on a
// collective or on tier I/O add their wall time to their own field, so a step splits into
// compute and waits. Waits outside a phase (debug accessors, checkpoints, full_parameters) are
// not counted: they belong to no step. A steady_clock read on each side is all it costs.
// Each timed part is also a span of the timeline trace (trace.h), in the category of its field,
// so a trace's per-step sums match these times.
// Thread safety: one thread (the training thread).
#pragma once

#include <chrono>

#include <optional>

#include "zt/host/engine_types.h"
#include "zt/host/trace.h"
#include "zt/work.h"

namespace zt {

using TimeField = double EngineTimes::*;

// The trace's name and category of a timed field.
inline const char* trace_category(TimeField field) {
  if (field == &EngineTimes::comm_wait) return trace::kCommWait;
  if (field == &EngineTimes::read_wait) return trace::kReadWait;
  if (field == &EngineTimes::write_wait) return trace::kWriteWait;
  if (field == &EngineTimes::optimizer) return trace::kOptimizer;
  return trace::kCompute;
}
inline const char* trace_name(TimeField field) {
  if (field == &EngineTimes::comm_wait) return "comm wait";
  if (field == &EngineTimes::read_wait) return "read wait";
  if (field == &EngineTimes::write_wait) return "write wait";
  if (field == &EngineTimes::optimizer) return "optimizer update";
  if (field == &EngineTimes::step) return "optimizer step";
  return "forward_backward";
}

class EngineClock {
 public:
  const EngineTimes& times() const { return times_; }

  // Adds the time from construction to destruction to `field` (also when an exception leaves
  // the scope), if a phase is running.
  class Timer {
   public:
    Timer(EngineClock& clock, TimeField field)
        : clock_(clock), field_(field), start_(std::chrono::steady_clock::now()) {
      if (clock_.in_phase_ > 0) span_.emplace(trace_name(field), trace_category(field));
    }
    ~Timer() {
      if (clock_.in_phase_ > 0) {
        const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
        clock_.times_.*field_ += d.count();
      }
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    EngineClock& clock_;
    TimeField field_;
    std::chrono::steady_clock::time_point start_;
    std::optional<trace::Scope> span_;
  };

  // forward_backward() or step() as a whole; the waits inside it count.
  class Phase {
   public:
    Phase(EngineClock& clock, TimeField field)
        : clock_(clock),
          field_(field),
          start_(std::chrono::steady_clock::now()),
          span_(trace_name(field), trace::kCompute) {
      ++clock_.in_phase_;
    }
    ~Phase() {
      const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
      clock_.times_.*field_ += d.count();
      --clock_.in_phase_;
    }
    Phase(const Phase&) = delete;
    Phase& operator=(const Phase&) = delete;

   private:
    EngineClock& clock_;
    TimeField field_;
    std::chrono::steady_clock::time_point start_;
    trace::Scope span_;
  };

  // work.wait() (its issuer's timeout), the time blocked added to `field`.
  void wait(Work& work, TimeField field) {
    const Timer timer(*this, field);
    work.wait();
  }

 private:
  EngineTimes times_;
  int in_phase_ = 0;
};

}  // namespace zt
