#include "run/step_trace.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "zt/error.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host/trace.h"

namespace zt::trainer {

namespace {

// What a rank stuck on trace.dir's storage is told (FileIoDeadline).
constexpr const char* kTraceWayOut =
    "check that trace.dir's storage answers (or set trace.dir to other storage); storage this "
    "slow but working needs a longer launch.timeout_s (the trace's file may take half of it)";

}  // namespace

ClockOffset measure_clock_offset(Communicator& comm) {
  constexpr int kRounds = 7;
  std::vector<int64_t> offsets;
  int64_t origin = 0;
  for (int i = 0; i < kRounds; ++i) {
    // Every rank leaves the barrier within the transport's latency of the others, and reads its
    // clock at once: the difference to rank 0's reading is the offset, up to that latency.
    comm.barrier()->wait();
    at::Tensor mine = at::tensor({trace::now_ns()}, at::kLong);
    at::Tensor all = at::empty({comm.size()}, at::kLong);
    all_gather_host(comm, all, mine);
    const int64_t* t = all.data_ptr<int64_t>();
    offsets.push_back(t[0] - t[comm.rank()]);
    origin = t[0];
  }
  std::nth_element(offsets.begin(), offsets.begin() + kRounds / 2, offsets.end());
  return {offsets[kRounds / 2], origin};
}

StepTrace::StepTrace(const TraceSettings& settings, Communicator& comm,
                     std::chrono::milliseconds io_limit)
    : settings_(settings), io_limit_(io_limit), rank_(comm.rank()) {
  if (!settings_.enabled) return;
  const ClockOffset clock = measure_clock_offset(comm);
  offset_ns_ = clock.offset_ns;
  origin_ns_ = clock.origin_ns;
  trace::clear_events();
}

void StepTrace::before_step(int64_t step) {
  const bool covered = settings_.covers(step);
  recorded_ = recorded_ || covered;
  trace::set_recording(covered);
}

bool StepTrace::after_step(int64_t step) const {
  trace::set_recording(false);
  return settings_.enabled && recorded_ && !written_ && step >= settings_.last_step;
}

void StepTrace::finish(const std::string& metadata) {
  trace::set_recording(false);
  // A run resumed past the traced steps recorded none: the first run's file stays.
  if (!settings_.enabled || written_ || !recorded_) return;
  written_ = true;
  // A trace that cannot be written (a full disk, a folder one host cannot write) is said, not
  // turned into the run's failure: thrown on one rank, it left the others waiting in their next
  // collective until launch.timeout_s.
  try {
    std::error_code ec;
    {
      const FileIoDeadline deadline("making trace.dir " + settings_.dir, io_limit_, kTraceWayOut);
      std::filesystem::create_directories(settings_.dir, ec);
    }
    if (ec) {
      throw IoError("cannot create trace.dir " + settings_.dir + ": " + ec.message() +
                    " (set trace.dir to a writable folder)");
    }
    // The job's clock origin, the same on every rank of one run (rank 0's clock, measured
    // together): `trainer trace merge` tells another run's file left in the folder by it.
    const std::string stamped = metadata.size() > 2 && metadata.front() == '{'
                                    ? "{\"clock_origin_ns\":" + std::to_string(origin_ns_) + "," +
                                          metadata.substr(1)
                                    : "{\"clock_origin_ns\":" + std::to_string(origin_ns_) + "}";
    trace::write_trace_file(file(), rank_, "rank " + std::to_string(rank_), offset_ns_, origin_ns_,
                            stamped, io_limit_, kTraceWayOut);
    if (rank_ == 0) std::printf("trace: %s (and each rank's beside it)\n", file().c_str());
  } catch (const Error& e) {
    // An earlier run's file of this rank would be merged as this run's.
    std::error_code ec;
    std::filesystem::remove(file(), ec);
    std::printf("zt: rank %d: trace not written, training goes on: %s\n", rank_, e.what());
  }
  std::fflush(stdout);
  trace::clear_events();
}

std::string StepTrace::file() const {
  return settings_.dir + "/rank-" + std::to_string(rank_) + ".json";
}

}  // namespace zt::trainer
