// The timeline trace of a training run ([trace], zt/host/trace.h): recording is on for the
// configured steps only, and at the end each rank writes <trace.dir>/rank-N.json, its clock moved
// onto rank 0's by an offset measured when the trace is set up, so the ranks' files lay side by
// side (and `trainer trace merge` puts them in one file). Thread safety: the training thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "settings/job_settings.h"
#include "zt/communicator.h"

namespace zt::trainer {

class StepTrace {
 public:
  // Collective when the trace is on (the clock offset is measured over `comm`); nothing when
  // off. `io_limit`: how long writing the file may block (FileIoDeadline) before the rank ends,
  // naming it.
  StepTrace(const TraceSettings& settings, Communicator& comm, std::chrono::milliseconds io_limit);
  // Recording on for the steps the trace covers: call before optimizer step `step` (1-based).
  void before_step(int64_t step);
  // Recording off after optimizer step `step`; true when that was the last traced step, so the
  // caller writes the file now (finish).
  bool after_step(int64_t step) const;
  // Writes this rank's file, once (at the last traced step, or at the end of a shorter run), and
  // only when some step was recorded: a run resumed past the traced steps leaves the first
  // run's file as it was.
  // `metadata`: a JSON object of the run (model, composition). A file that cannot be written is
  // said on stdout and training goes on (thrown on one rank, its peers waited for it); one whose
  // storage does not answer within the limit ends the rank with an io error naming it (every
  // rank writes at the same step, and with all of them blocked nothing ended the job).
  void finish(const std::string& metadata);
  // Where this rank's file goes.
  std::string file() const;

 private:
  TraceSettings settings_;
  std::chrono::milliseconds io_limit_;
  int rank_ = 0;
  int64_t offset_ns_ = 0;  // add to this rank's clock to read rank 0's
  int64_t origin_ns_ = 0;  // rank 0's clock when the trace was set up: the files' time zero
  bool written_ = false;
  bool recorded_ = false;  // some step was traced by this process
};

// The clock offset to rank 0 (ns to add to this rank's CLOCK_MONOTONIC), and rank 0's time
// now: the median over a few barrier-aligned exchanges of the ranks' clocks. Collective.
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t origin_ns = 0;
};
ClockOffset measure_clock_offset(Communicator& comm);

}  // namespace zt::trainer
