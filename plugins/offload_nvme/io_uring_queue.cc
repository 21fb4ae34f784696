#include "io_uring_queue.h"

#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

#include "file_util.h"
#include "zt/bytes.h"
#include "zt/error.h"

namespace zt::nvme {

namespace {

using Clock = std::chrono::steady_clock;

// user_data of the two kinds of SQE that are not data requests (those carry slot index + 1).
// Not ~0: liburing's LIBURING_UDATA_TIMEOUT, whose completions its peek drops on kernels without
// IORING_FEAT_EXT_ARG (before 5.11); the wakeup would never be seen again.
constexpr uint64_t kWakeTag = ~0ull - 2;
constexpr uint64_t kCancelTag = ~0ull - 1;
// The way out of space that went while the job ran (another process, a copy-on-write file
// system, a file left sparse): the tier's own setting.
constexpr const char* kNoRoom = "; free space on that file system, or set "
                                "plugin.offload_nvme.path to a folder on another (--set "
                                "plugin.offload_nvme.path=...)";
// An idle thread still wakes this often, so no wait is unbounded even if a wakeup were lost.
constexpr std::chrono::milliseconds kIdleWait{1000};

std::string seconds_text(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", ms.count() / 1000.0);
  return buf;
}

}  // namespace

// A piece of a transfer staged in one place: the caller's memory (direct) or a pool buffer.
struct IoQueue::Chunk {
  Job* job = nullptr;
  int64_t pos = 0;       // offset of the chunk within the transfer
  int64_t len = 0;       // file bytes it moves, a multiple of alignment
  int64_t user_len = 0;  // of those, the caller's bytes (less than len only at the tail)
  uint8_t* buf = nullptr;
  bool bounce = false;
  int64_t issued = 0;      // bytes handed to requests so far
  int outstanding = 0;     // requests in flight and awaited
  bool abandoned = false;  // a request timed out: the kernel may still use buf
};

struct IoQueue::Job {
  Transfer t;
  int64_t padded = 0;      // round_up(bytes, alignment): what moves in the file
  int64_t direct_end = 0;  // [0, direct_end) goes straight to the caller's memory
  int64_t pos = 0;         // where the next chunk starts
  int64_t requests = 0;    // this job's share of pending_requests_
  bool started = false;
  bool failed = false;
  std::string error;
  std::list<Chunk> chunks;  // opened and not finished, in file order
};

struct IoQueue::Slot {
  Chunk* chunk = nullptr;  // null when free
  int64_t offset = 0;      // within the chunk
  int64_t length = 0;
  int64_t moved = 0;  // done by earlier short completions of this request
  // Its first submission: resubmissions (EAGAIN, a short transfer) keep it, so a request that
  // keeps coming back still stalls out after request_timeout (IoWork's wait counts on that).
  Clock::time_point since;
  int retries = 0;  // EAGAIN/EINTR answers so far
  bool abandoned = false;
};

std::string io_uring_lacks(const io_uring_probe* probe) {
  if (probe == nullptr) return "probe of its operations (READ, WRITE, ASYNC_CANCEL)";
  std::string lacks;
  for (const auto& [op, name] :
       {std::pair{IORING_OP_READ, "READ"}, std::pair{IORING_OP_WRITE, "WRITE"},
        std::pair{IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"}}) {
    if (!io_uring_opcode_supported(probe, op))
      lacks += (lacks.empty() ? "" : ", ") + std::string(name);
  }
  return lacks;
}

IoQueue::IoQueue(const IoQueueOptions& options)
    : options_(options),
      pool_(options.buffer_count, options.buffer_bytes, options.alignment),
      ring_(std::make_unique<io_uring>()) {
  // Room for every request, the wakeup read and a cancel per request, so get_sqe never fails.
  const unsigned entries = static_cast<unsigned>(2 * options_.queue_depth + 2);
  const int rc = io_uring_queue_init(entries, ring_.get(), 0);
  if (rc < 0) {
    // ENOMEM: kernels before 5.12 charge the ring to RLIMIT_MEMLOCK; EPERM/ENOSYS: turned off.
    throw IoError("offload_nvme: io_uring is not available (io_uring_queue_init with " +
                  std::to_string(entries) + " entries: " + errno_text(-rc) + "); " +
                  (-rc == ENOMEM ? "raise the locked-memory limit (ulimit -l) or lower "
                                   "plugin.offload_nvme.queue_depth"
                                 : "it may be turned off (/proc/sys/kernel/io_uring_disabled) or "
                                   "blocked by a container's seccomp profile: allow it, or "
                                   "choose another offload tier"));
  }
  // Checked before any request: an old kernel's EINVAL read as O_DIRECT refused, and the I/O
  // thread's wake-up read, failing at once, spun it at full CPU while idle.
  io_uring_probe* probe = io_uring_get_probe_ring(ring_.get());
  const std::string lacks = io_uring_lacks(probe);
  if (probe != nullptr) io_uring_free_probe(probe);
  if (!lacks.empty()) {
    io_uring_queue_exit(ring_.get());
    utsname kernel{};
    uname(&kernel);
    throw IoError("offload_nvme: this kernel's io_uring has no " + lacks + " (Linux " +
                  kernel.release +
                  "; offload_nvme needs 5.6 or later): run on a newer kernel, "
                  "or choose plugins.offload_optimizer / offload_param = \"offload_cpu\"");
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    const int err = errno;
    io_uring_queue_exit(ring_.get());
    throw IoError("offload_nvme: eventfd failed: " + errno_text(err));
  }
  slots_.resize(options_.queue_depth);
  for (int i = options_.queue_depth - 1; i >= 0; --i) free_slots_.push_back(i);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    // EAGAIN: the process or its cgroup has no thread to spare.
    io_uring_queue_exit(ring_.get());
    close(wake_fd_);
    throw IoError(std::string("offload_nvme: cannot start its I/O thread: ") + e.what() +
                  " (raise the process limit, ulimit -u, or the cgroup's pids.max)");
  }
  pthread_setname_np(thread_.native_handle(), "zt-nvme-io");  // for top -H, gdb, perf
}

IoQueue::~IoQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  eventfd_write(wake_fd_, 1);
  thread_.join();
  io_uring_queue_exit(ring_.get());
  close(wake_fd_);
  if (abandoned_->load())
    pool_.keep_all_forever();  // the kernel may still write into a bounce buffer
}

int64_t IoQueue::requests_for(int64_t bytes) const {
  const int64_t padded = round_up(bytes, options_.alignment);
  // Chunk boundaries (bounce buffers, the direct part's end) can split one more block each.
  return (padded + options_.block_bytes - 1) / options_.block_bytes +
         (padded + options_.buffer_bytes - 1) / options_.buffer_bytes + 1;
}

void IoQueue::enqueue(Transfer transfer) {
  auto job = std::make_unique<Job>();
  job->padded = round_up(transfer.bytes, options_.alignment);
  const bool aligned = reinterpret_cast<uintptr_t>(transfer.host) % options_.alignment == 0;
  // Only whole aligned blocks of an aligned pointer go direct: the tail past `bytes` belongs to
  // the caller's neighbours, not to us.
  job->direct_end = aligned ? transfer.bytes / options_.alignment * options_.alignment : 0;
  job->requests = requests_for(transfer.bytes);
  job->t = std::move(transfer);
  pending_requests_ += job->requests;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    incoming_.push_back(std::move(job));
  }
  eventfd_write(wake_fd_, 1);
}

void IoQueue::run() {
  try {
    while (true) {
      take_incoming();
      if (stop_seen_) {
        for (auto& job : jobs_) {
          fail(*job, job->started ? "cancelled: the offload tier was destroyed while it ran"
                                  : "cancelled: the offload tier was destroyed before it ran");
        }
      }
      issue();
      submit_pending();
      complete_finished_jobs();
      if (stop_seen_ && jobs_.empty() && live_requests_ == 0) break;
      wait_and_reap();
      check_timeouts();
      complete_finished_jobs();
    }
  } catch (const std::exception& e) {
    // Only a bug or an exhausted heap gets here; fail what is queued rather than hang callers.
    broken_ = std::string("offload_nvme's I/O thread failed: ") + e.what();
    if (live_requests_ > 0) abandoned_->store(true);  // their completions are never awaited
    while (true) {
      take_incoming();
      for (auto& job : jobs_) {
        job->t.done(std::make_exception_ptr(IoError(job->t.label + ": " + broken_)));
      }
      jobs_.clear();
      if (stop_seen_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

void IoQueue::take_incoming() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& job : incoming_) jobs_.push_back(std::move(job));
  incoming_.clear();
  stop_seen_ = stopping_;
}

bool IoQueue::blocked_by_earlier(const Job& job) const {
  const int64_t begin = job.t.file_offset, end = begin + job.padded;
  for (const auto& other : jobs_) {
    if (other.get() == &job) return false;
    if (other->t.fd != job.t.fd || !(other->t.write || job.t.write)) continue;
    const int64_t other_begin = other->t.file_offset, other_end = other_begin + other->padded;
    if (begin < other_end && other_begin < end) return true;
  }
  return false;
}

IoQueue::Chunk* IoQueue::next_chunk(Job& job) {
  if (!job.chunks.empty() && job.chunks.back().issued < job.chunks.back().len) {
    return &job.chunks.back();
  }
  if (job.pos >= job.padded) return nullptr;
  Chunk c;
  c.job = &job;
  c.pos = job.pos;
  if (job.pos < job.direct_end) {
    c.len = c.user_len = job.direct_end - job.pos;
    c.buf = job.t.host + job.pos;
  } else {
    c.buf = pool_.acquire();
    if (!c.buf) return nullptr;  // every buffer is in flight: this job waits for one
    c.bounce = true;
    c.len = std::min(pool_.buffer_bytes(), job.padded - job.pos);
    c.user_len = std::min(c.len, job.t.bytes - job.pos);
    if (job.t.write) {
      std::memcpy(c.buf, job.t.host + job.pos, c.user_len);
      // The padding reaches the file; zeros rather than a previous transfer's bytes.
      std::memset(c.buf + c.user_len, 0, c.len - c.user_len);
    }
  }
  job.pos += c.len;
  job.chunks.push_back(c);
  return &job.chunks.back();
}

void IoQueue::issue() {
  if (!broken_.empty() || stop_seen_) return;
  for (auto& job_ptr : jobs_) {
    if (free_slots_.empty()) break;
    Job& job = *job_ptr;
    if (job.failed) continue;
    if (!job.started) {
      if (blocked_by_earlier(job)) continue;
      job.started = true;
    }
    while (!free_slots_.empty()) {
      Chunk* chunk = next_chunk(job);
      if (!chunk) break;
      const int index = free_slots_.back();
      free_slots_.pop_back();
      Slot& slot = slots_[index];
      slot.chunk = chunk;
      slot.offset = chunk->issued;
      slot.length = std::min(options_.block_bytes, chunk->len - chunk->issued);
      slot.moved = 0;
      slot.abandoned = false;
      chunk->issued += slot.length;
      ++chunk->outstanding;
      ++live_requests_;
      prepare_request(slot);
    }
  }
}

void IoQueue::prepare_request(Slot& slot, bool again) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (!sqe) {
    submit_pending();
    sqe = io_uring_get_sqe(ring_.get());
    if (!sqe) throw IoError("offload_nvme: the io_uring submission queue is full");
  }
  Chunk& c = *slot.chunk;
  uint8_t* memory = c.buf + slot.offset + slot.moved;
  const uint64_t file_offset = c.job->t.file_offset + c.pos + slot.offset + slot.moved;
  const unsigned length = static_cast<unsigned>(slot.length - slot.moved);
  if (c.job->t.write) {
    io_uring_prep_write(sqe, c.job->t.fd, memory, length, file_offset);
  } else {
    io_uring_prep_read(sqe, c.job->t.fd, memory, length, file_offset);
  }
  io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(&slot - slots_.data()) + 1);
  if (!again) {
    slot.since = Clock::now();
    slot.retries = 0;
  }
  ++unsubmitted_;
}

void IoQueue::submit_pending() {
  if (unsubmitted_ == 0) return;
  // io_uring_submit can be interrupted or short of kernel memory for a moment; it keeps the
  // SQEs it did not take, so trying again loses nothing.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int rc = io_uring_submit(ring_.get());
    if (rc >= 0) {
      // The kernel may take fewer than were queued (short of memory, or stopped at an SQE it
      // could not set up): the rest stay in the ring, and nothing else would submit them while
      // the caller waits for them.
      unsubmitted_ = std::max(0, unsubmitted_ - rc);
      if (io_uring_sq_ready(ring_.get()) == 0) {
        unsubmitted_ = 0;
        return;
      }
      if (rc > 0) continue;
    } else if (rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      throw IoError("offload_nvme: io_uring_submit failed: " + errno_text(-rc));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  throw IoError("offload_nvme: io_uring_submit kept failing with EAGAIN/EBUSY for 1 s");
}

void IoQueue::arm_wakeup() {
  if (wake_armed_) return;
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (!sqe) return;  // next round; the bounded wait covers it
  io_uring_prep_read(sqe, wake_fd_, &wake_value_, sizeof wake_value_, 0);
  io_uring_sqe_set_data64(sqe, kWakeTag);
  ++unsubmitted_;
  wake_armed_ = true;
}

void IoQueue::wait_and_reap() {
  arm_wakeup();
  submit_pending();
  std::chrono::milliseconds wait = kIdleWait;
  if (live_requests_ > 0) {
    // Wake by the oldest live request's deadline, so a stalled one is reported on time.
    const auto now = Clock::now();
    for (const Slot& s : slots_) {
      if (!s.chunk || s.abandoned) continue;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          s.since + options_.request_timeout - now);
      wait = std::min(wait, std::max(left, std::chrono::milliseconds(1)));
    }
  }
  __kernel_timespec ts;
  ts.tv_sec = wait.count() / 1000;
  ts.tv_nsec = (wait.count() % 1000) * 1000000;
  io_uring_cqe* cqe = nullptr;
  // -ETIME (nothing came) and -EINTR are normal; the loop comes back here either way.
  io_uring_wait_cqe_timeout(ring_.get(), &cqe, &ts);
  while (io_uring_peek_cqe(ring_.get(), &cqe) == 0) {
    const uint64_t user_data = io_uring_cqe_get_data64(cqe);
    const int result = cqe->res;
    io_uring_cqe_seen(ring_.get(), cqe);
    on_completion(user_data, result);
  }
}

void IoQueue::on_completion(uint64_t user_data, int result) {
  if (user_data == kWakeTag) {
    wake_armed_ = false;
    return;
  }
  if (user_data == kCancelTag) return;
  const size_t index = user_data - 1;
  Slot& slot = slots_[index];
  if (slot.abandoned) {
    // Came back after its transfer was failed; the queue is broken, the slot stays unused.
    slot.chunk = nullptr;
    return;
  }
  Chunk& chunk = *slot.chunk;
  Job& job = *chunk.job;
  const int64_t want = slot.length - slot.moved;
  const int64_t file_offset = job.t.file_offset + chunk.pos + slot.offset + slot.moved;
  const char* op = job.t.write ? "write" : "read";
  if (result == -EAGAIN || result == -EINTR) {
    // The kernel asks to try again: not a failure, but not a busy loop either (a device that
    // keeps answering EAGAIN stalls out at request_timeout from the first submission).
    slot.retries = std::min(slot.retries + 1, 10);
    std::this_thread::sleep_for(std::chrono::microseconds(100 * slot.retries));
    prepare_request(slot, /*again=*/true);
    return;
  }
  if (result < 0) {
    const int error = -result;
    fail(job, std::string("the ") + op + " request of " + std::to_string(want) +
                  " bytes at file offset " + std::to_string(file_offset) +
                  " failed: " + errno_text(error) +
                  (error == EIO ? "; the device reported an error (see dmesg)"
                   : error == ENOSPC || error == EDQUOT ? kNoRoom
                   : error == EROFS ? "; the file system turned read-only (see dmesg): "
                                      "set plugin.offload_nvme.path to a folder on another"
                                    : ""));
  } else if (result == 0) {
    if (job.t.write) {
      fail(job, "the write request of " + std::to_string(want) + " bytes at file offset " +
                    std::to_string(file_offset) +
                    " wrote nothing (the file system is likely full)" + kNoRoom);
    } else {
      fail(job, "the read request of " + std::to_string(want) + " bytes at file offset " +
                    std::to_string(file_offset) +
                    " returned 0 bytes: the file ends before it (truncated under the running "
                    "job?); leave the offload folder alone while a job runs");
    }
  } else if (result < want && !job.t.write && (file_offset + result) % options_.alignment != 0 &&
             (fcntl(job.t.fd, F_GETFL) & O_DIRECT) != 0) {
    // O_DIRECT reads end short off a block boundary only at the file's end; the rest, asked
    // for at that unaligned offset, would fail as EINVAL.
    fail(job, "the read request of " + std::to_string(want) + " bytes at file offset " +
                  std::to_string(file_offset) + " returned " + std::to_string(result) +
                  " bytes: the file ends before it (truncated under the running job?); leave "
                  "the offload folder alone while a job runs");
  } else if (result < want) {
    // A short transfer that made progress: move the rest (the offset stays aligned for the
    // block-multiple results O_DIRECT gives).
    slot.moved += result;
    prepare_request(slot, /*again=*/true);
    return;
  }
  --chunk.outstanding;
  --live_requests_;
  slot.chunk = nullptr;
  free_slots_.push_back(static_cast<int>(index));
  if (!job.failed && chunk.issued == chunk.len && chunk.outstanding == 0) finish_chunk(chunk);
}

void IoQueue::finish_chunk(Chunk& chunk) {
  Job& job = *chunk.job;
  if (chunk.bounce) {
    if (!job.t.write) std::memcpy(job.t.host + chunk.pos, chunk.buf, chunk.user_len);
    pool_.release(chunk.buf);
  }
  for (auto it = job.chunks.begin(); it != job.chunks.end(); ++it) {
    if (&*it == &chunk) {
      job.chunks.erase(it);
      return;
    }
  }
}

void IoQueue::check_timeouts() {
  const auto now = Clock::now();
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (!slot.chunk || slot.abandoned || now - slot.since < options_.request_timeout) continue;
    Chunk& chunk = *slot.chunk;
    Job& job = *chunk.job;
    const int64_t file_offset = job.t.file_offset + chunk.pos + slot.offset + slot.moved;
    const std::string what = std::string("the ") + (job.t.write ? "write" : "read") +
                             " request of " + std::to_string(slot.length - slot.moved) +
                             " bytes at file offset " + std::to_string(file_offset) +
                             " did not complete within " + seconds_text(options_.request_timeout);
    fail(job, what + ": the device or file system stalled (see dmesg); offload_nvme stops "
                     "using this tier, so the job must be restarted");
    if (broken_.empty()) {
      broken_ = "not run: an earlier transfer (" + job.t.label + ") stalled: " + what +
                "; offload_nvme stopped using this tier (see dmesg), restart the job";
    }
    // The kernel may still write into the memory, so neither it nor the slot is used again.
    abandoned_->store(true);
    slot.abandoned = true;
    chunk.abandoned = true;
    --chunk.outstanding;
    --live_requests_;
    if (io_uring_sqe* sqe = io_uring_get_sqe(ring_.get())) {
      io_uring_prep_cancel64(sqe, i + 1, 0);  // best effort; the result is not awaited
      io_uring_sqe_set_data64(sqe, kCancelTag);
      ++unsubmitted_;
    }
  }
  submit_pending();
}

void IoQueue::fail(Job& job, const std::string& reason) {
  if (job.failed) return;  // the first failure is the one worth reporting
  job.failed = true;
  job.error = reason;
}

void IoQueue::complete_finished_jobs() {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = **it;
    if (!broken_.empty()) fail(job, broken_);
    bool finished;
    if (job.failed) {
      finished = std::all_of(job.chunks.begin(), job.chunks.end(),
                             [](const Chunk& c) { return c.outstanding == 0; });
      if (finished) {
        for (Chunk& c : job.chunks) {
          if (c.bounce && !c.abandoned) pool_.release(c.buf);
        }
        job.chunks.clear();
      }
    } else {
      finished = job.pos == job.padded && job.chunks.empty();
    }
    if (!finished) {
      ++it;
      continue;
    }
    std::unique_ptr<Job> done = std::move(*it);
    it = jobs_.erase(it);
    pending_requests_ -= done->requests;
    done->t.done(done->failed ? std::make_exception_ptr(IoError(done->t.label + ": " + done->error))
                              : nullptr);
  }
}

}  // namespace zt::nvme
