// Fault injection into a real job, for the failure-path tests only: ZT_TEST_FAULT parsed once per
// process. "skip_collective:RANK:SEQ": rank RANK does not issue its SEQ-th collective of the world
// group (the observed communicator); "stall_read:RANK:N": its N-th tier read never completes (the
// observed tier); "fail_read:RANK:N": its N-th tier read fails with an IoError, as on EIO;
// "stall_checkpoint_read:RANK:N": its N-th open or read of a checkpoint's
// rank files blocks as on a file system that stopped answering (the checkpoint reader);
// "stall_checkpoint_manifest:RANK:N": the same for its N-th read of a checkpoint's manifest;
// "stall_checkpoint_write:RANK:N": its N-th file operation of a checkpoint save on the saving
// thread (util/save_io_limit.h) blocks the same way;
// "stall_trace_write:RANK:N": its N-th trace file write blocks the same way (trace.h's
// write_trace_file); "stall_flight_dump:RANK:N": its N-th flight record dump does
// (flight_recorder); "stall_offload_cleanup:0:N": the launcher's N-th removal of the offload files
// its stopped ranks left does (remove_offload_leftovers; a launcher has no RANK: it counts as 0);
// "slow_step:RANK:MS": each training step of rank RANK begins with a sleep of MS milliseconds
// (Engine::begin_step), so that a test's signals arrive inside a step on any host, however fast.
// Unset: nothing.
// Thread safety: injected_fault() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace zt {

inline constexpr const char* kTestFaultVar = "ZT_TEST_FAULT";

struct InjectedFault {
  // "skip_collective", "stall_read", "fail_read", "stall_checkpoint_read",
  // "stall_checkpoint_manifest", "stall_checkpoint_write", "stall_trace_write",
  // "stall_flight_dump", "stall_offload_cleanup", "slow_step" or "" (none)
  std::string kind;
  int rank = -1;    // the rank it hits
  int64_t nth = 0;  // which collective (sequence number) or which read (1-based); slow_step: ms
};

// ZT_TEST_FAULT as set when first asked; an unparsable value is reported on stderr once and
// ignored (it is a test hook, not a user setting).
const InjectedFault& injected_fault();
// This process's rank as its launcher's environment says (RANK), 0 when unset.
int env_rank();

// For the stall_* faults of files: when `kind` is injected on this rank and this is its N-th
// call (`calls` counts them), blocks as a file system that stopped answering would, for longer
// than `limit` (the FileIoDeadline around the call, which should end the process first).
void stall_if_injected(const char* kind, std::atomic<int64_t>& calls,
                       std::chrono::milliseconds limit);

// For slow_step: sleeps its milliseconds when injected on this rank.
void sleep_if_slow_step_injected();

}  // namespace zt
