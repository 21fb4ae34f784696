// EngineClock: where one rank's time goes (EngineTimes). forward_backward() and step() are timed
// as a whole (a Phase each); inside them the optimizer's kernel calls and every wait on a
// collective or on tier I/O add their wall time to their own field, so a step splits into
// compute and waits. Waits outside a phase (debug accessors, checkpoints, full_parameters) are
// not counted: they belong to no step. A steady_clock read on each side is all it costs.
// Thread safety: one thread (the training thread).
#pragma once

#include <chrono>

#include "zt/engine_types.h"
#include "zt/work.h"

namespace zt {

using TimeField = double EngineTimes::*;

class EngineClock {
 public:
  const EngineTimes& times() const { return times_; }

  // Adds the time from construction to destruction to `field` (also when an exception leaves
  // the scope), if a phase is running.
  class Timer {
   public:
    Timer(EngineClock& clock, TimeField field)
        : clock_(clock), field_(field), start_(std::chrono::steady_clock::now()) {}
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
  };

  // forward_backward() or step() as a whole; the waits inside it count.
  class Phase {
   public:
    Phase(EngineClock& clock, TimeField field)
        : clock_(clock), field_(field), start_(std::chrono::steady_clock::now()) {
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
