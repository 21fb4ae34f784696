// Collective flight recorder: every rank keeps its last N collectives (sequence number per
// communicator, op, group, bytes, dtype, the unit or phase that issued it, issue and completion
// times) and, on a failure, a hang or SIGUSR2, writes them with what each of its threads is doing
// (trace.h's activity) to <out_dir>/flight/rank-N.json. diagnose_flight() (flight_diagnosis.h)
// reads the files of all ranks and names the collective the job hangs in and the rank that holds it
// back.
//
// Collectives reach the recorder through observe_communicator(), a Communicator that forwards
// every op to the plugin's communicator and records it; storage transfers are labelled through
// observe_tier(), so a rank blocked in I/O says which file. Both also give the timeline trace
// its comm and storage lanes, and carry the test-only faults of ZT_TEST_FAULT
// (core/src/util/fault_injection.h).
// Thread safety: every function may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zt/api.h"
#include "zt/communicator.h"
#include "zt/offload.h"

namespace zt {

struct CollectiveRecord {
  int64_t seq = 0;  // 1, 2, ... per communicator (group), in issue order
  std::string group;
  std::string op;  // comm_op_name()
  int64_t bytes = 0;
  std::string dtype;
  std::string phase;  // what the issuing thread was doing: "unit 3 forward", "step"
  int64_t issued_ns = 0;
  int64_t completed_ns = 0;  // 0 while not completed
  bool failed = false;
};

// The record of this process (one per rank).
class ZT_API FlightRecorder {
 public:
  static FlightRecorder& instance();
  // How many collectives it keeps (default 4096); older ones are dropped.
  void set_capacity(size_t n);
  // Where dump() writes, and the rank and world it states ("" turns dumps off); a run's first
  // failure after it dumps (one per path). `io_limit` > 0: how long a dump waits for its file
  // (written on a thread of its own) before it gives up, saying so, and goes on: a dump comes on
  // the way to an error, which storage that stopped answering held back for good.
  void set_dump_path(const std::string& path, int rank, int world,
                     std::chrono::milliseconds io_limit = std::chrono::milliseconds(0));
  const std::string& dump_path() const { return path_; }

  // An op was issued; returns its record's key for completed().
  int64_t issued(CollectiveRecord record);
  void completed(int64_t key, int64_t completed_ns, bool failed);
  std::vector<CollectiveRecord> records() const;

  // The dump as JSON text: rank, world, now, the collectives oldest first with their state
  // ("issued", "running" or "done"), and every thread's activity. Never throws but bad_alloc.
  std::string to_json(const std::string& reason) const;
  // Writes to_json(reason) to dump_path() (creating its folder); returns false, without
  // throwing, when that fails or no path is set (a dump runs on failure paths).
  bool dump(const std::string& reason) const noexcept;
  // A failure's dump: only the first of the process is written (where the failure was seen, with
  // the wait it happened in), not the ones its unwinding causes on the way out; none before the
  // first collective (nothing to tell: a bad file or model refused at start leaves no files).
  bool dump_failure(const std::string& reason) noexcept;
  // SIGUSR2's dump: written unless a failure's dump was.
  bool dump_on_request() noexcept;

 private:
  FlightRecorder() = default;
  // dump() with dump_mutex_ held.
  bool write_dump(const std::string& reason) const noexcept;
  mutable std::mutex mutex_;
  // One dump at a time: a failure's dump and SIGUSR2's (the launcher's, as a peer fails) can
  // come at once, and the failure's must be the one left.
  mutable std::mutex dump_mutex_;
  std::deque<CollectiveRecord> ring_;
  size_t capacity_ = 4096;
  int64_t first_key_ = 0;  // key of ring_[0]
  std::string path_;
  int rank_ = 0, world_ = 1;
  std::chrono::milliseconds io_limit_{0};
  std::atomic<bool> failure_dumped_{false};
};

// A SIGUSR2 makes this process dump its flight record (from a thread of its own, not the signal
// handler). Installed once; later calls do nothing.
ZT_API void dump_flight_record_on_sigusr2();

// What observe_communicator checks and injects.
struct ObserveOptions {
  // launch.check_collectives: before each op, the ranks all-gather its fingerprint (sequence,
  // op, bytes, dtype, issuing phase) and stop at the first that differs with a CommError naming
  // both sides, instead of hanging or mixing data.
  bool check_collectives = false;
};

// `inner` with every collective recorded (flight recorder, comm lane of the trace, the wait in
// the caller's lane) under `group` ("world"); split() returns observed communicators too.
ZT_API std::unique_ptr<Communicator> observe_communicator(std::unique_ptr<Communicator> inner,
                                                          const std::string& group,
                                                          const ObserveOptions& options = {});
// `inner` with reads and writes labelled (region name, bytes, the tier) for the trace's storage
// lane and for what a blocked thread is waiting on.
ZT_API std::unique_ptr<OffloadTier> observe_tier(std::unique_ptr<OffloadTier> inner,
                                                 const std::string& id);

}  // namespace zt
