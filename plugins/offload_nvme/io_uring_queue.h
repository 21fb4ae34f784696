// IoQueue: one io_uring and the thread that owns it. The training thread hands over whole
// transfers (enqueue); the I/O thread splits each into requests of at most `block_bytes`, keeps
// at most `queue_depth` of them in flight, reaps their completions, and calls the transfer's
// `done` once with nullptr or an IoError. Owning the ring on one thread means no locking around
// submission and completion; the training thread only touches a mutex-guarded list and an
// eventfd the ring itself listens on, so a new transfer wakes the thread at once.
//
// Every wait is bounded: a request not completed `request_timeout` after its submission fails
// its transfer with an IoError (a stalled device never hangs training). The ring cannot take
// such a request back for sure, so the queue stops there: every later transfer fails at once
// with the same message, and the buffer the request used is never reused.
//
// Alignment: a transfer moves round_up(bytes, alignment) bytes of the file. Where the host
// pointer is aligned those bytes go straight to/from it (zero copy), except a tail shorter than
// `alignment` past `bytes`, which, like a whole transfer from an unaligned pointer, is staged
// through the AlignedPool: the caller's memory past `bytes` is never read or written.
//
// Ordering: transfers run concurrently, but a transfer whose file range overlaps an earlier,
// unfinished one on the same file (and one of them writes) starts only after it, so a read
// queued after a write sees the write.
// Thread safety: enqueue() from any thread; the destructor from the owner.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aligned_pool.h"

struct io_uring;
struct io_uring_probe;

namespace zt::nvme {

// The operations IoQueue sends that `probe` (io_uring_get_probe_ring's answer; nullptr where the
// kernel predates probing, 5.6) says this kernel lacks, as "READ, WRITE"; "" when it has them.
// Kernels 5.1-5.5 set a ring up, then answered every read and write with EINVAL.
std::string io_uring_lacks(const io_uring_probe* probe);

struct IoQueueOptions {
  int queue_depth = 8;            // requests in flight
  int64_t block_bytes = 1 << 20;  // largest request; a multiple of alignment
  int64_t alignment = 4096;       // O_DIRECT alignment of offsets, lengths and memory
  int buffer_count = 4;           // bounce buffers
  int64_t buffer_bytes = 16 << 20;
  std::chrono::milliseconds request_timeout{60000};
};

// One caller's read or write of a file range.
struct Transfer {
  int fd = -1;
  bool write = false;
  int64_t file_offset = 0;  // multiple of alignment
  uint8_t* host = nullptr;  // the caller's bytes; valid until done() ran
  int64_t bytes = 0;        // the caller's length; round_up(bytes, alignment) of the file move
  // Names the transfer in messages: "write of 4097 bytes at offset 8192 of region 'm' (file
  // runs/nvme/zt-j/rank0/m-1.bin) at step 12".
  std::string label;
  // Called once on the I/O thread, with nullptr on success or the IoError.
  std::function<void(std::exception_ptr)> done;
  // Kept alive until done() ran (the open region file, so its descriptor stays valid).
  std::shared_ptr<void> keep_alive;
};

class IoQueue {
 public:
  // Sets up the ring and starts the thread. Throws IoError when io_uring is unavailable.
  explicit IoQueue(const IoQueueOptions& options);
  // Fails transfers that have not started, waits (at most request_timeout) for requests in
  // flight, then stops the thread and closes the ring.
  ~IoQueue();
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;

  void enqueue(Transfer transfer);
  // Requests enqueued and not yet completed, an upper bound for wait timeouts.
  int64_t pending_requests() const { return pending_requests_.load(); }
  // The most requests `bytes` can be split into.
  int64_t requests_for(int64_t bytes) const;
  int64_t staging_bytes() const { return pool_.total_bytes(); }
  const IoQueueOptions& options() const { return options_; }
  // Set once a request was abandoned (it stalled past request_timeout, or the I/O thread failed
  // with requests in flight): the kernel may still write into the memory it was given, the
  // callers' own for direct transfers. Memory handed to this queue must then never be freed
  // (NvmeTier's host buffers leak; so do the bounce buffers): reused, a late completion would
  // corrupt whatever lives there. Shared, so it outlives the queue.
  std::shared_ptr<const std::atomic<bool>> requests_abandoned() const { return abandoned_; }
  // The same flag, for a caller that gave up waiting on a transfer still in the queue (a timed
  // out IoWork): its memory may still be in the kernel's hands.
  std::shared_ptr<std::atomic<bool>> abandonment_flag() { return abandoned_; }

 private:
  struct Job;
  struct Chunk;
  struct Slot;

  void run();
  void take_incoming();
  bool blocked_by_earlier(const Job& job) const;
  Chunk* next_chunk(Job& job);
  void issue();
  // Queues the SQE of the rest of `slot`'s request; `again` for a resubmission, which keeps
  // the time of its first submission.
  void prepare_request(Slot& slot, bool again = false);
  void arm_wakeup();
  void wait_and_reap();
  void on_completion(uint64_t user_data, int result);
  void finish_chunk(Chunk& chunk);
  void check_timeouts();
  void fail(Job& job, const std::string& reason);
  void complete_finished_jobs();
  void submit_pending();

  IoQueueOptions options_;
  AlignedPool pool_;
  std::unique_ptr<io_uring> ring_;
  int wake_fd_ = -1;

  std::mutex mutex_;  // guards incoming_ and stopping_
  std::vector<std::unique_ptr<Job>> incoming_;
  bool stopping_ = false;
  std::atomic<int64_t> pending_requests_{0};

  // I/O thread only.
  std::list<std::unique_ptr<Job>> jobs_;
  std::vector<Slot> slots_;
  std::vector<int> free_slots_;
  int live_requests_ = 0;  // in flight and still awaited
  int unsubmitted_ = 0;    // SQEs prepared since the last io_uring_submit
  bool wake_armed_ = false;
  uint64_t wake_value_ = 0;
  bool stop_seen_ = false;
  std::string broken_;  // set once a request timed out: every later transfer fails with it
  std::shared_ptr<std::atomic<bool>> abandoned_ = std::make_shared<std::atomic<bool>>(false);

  std::thread thread_;
};

}  // namespace zt::nvme
