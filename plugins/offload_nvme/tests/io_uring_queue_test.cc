// The I/O queue on its own (built from the plugin's sources), for what the plugin cannot be
// made to do on a healthy disk: a request that never completes. A read from a FIFO nobody
// writes to is exactly that; with a short request timeout it must fail its transfer with an
// IoError, fail later transfers at once, and let the queue be destroyed promptly. And a write
// that finds its file system full (a 1 MiB tmpfs in a private mount namespace; Skipped, saying
// why, where one cannot be mounted).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>

#include "../../../tests/skip.h"
#include "aligned_pool.h"
#include "io_uring_queue.h"
#include "nvme_test_support.h"
#include "test_util.h"
#include "zt/error.h"

using zt::test::contains;

namespace {

using Clock = std::chrono::steady_clock;

std::string error_text(std::exception_ptr e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const zt::IoError& io) {
    return io.what();
  } catch (const std::exception& other) {
    return std::string("not an IoError: ") + other.what();
  }
}

}  // namespace

TEST_CASE("a request stuck past the timeout fails with an IoError, not a hang") {
  zt::test::TempDir dir;
  const std::string fifo = dir.file("stuck.fifo");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const int fd = open(fifo.c_str(), O_RDWR);  // O_RDWR: open does not wait for a writer
  REQUIRE(fd >= 0);
  void* memory = nullptr;
  REQUIRE(posix_memalign(&memory, 4096, 8192) == 0);

  zt::nvme::IoQueueOptions options;
  options.queue_depth = 2;
  options.buffer_count = 1;
  options.buffer_bytes = 4096;
  options.request_timeout = std::chrono::milliseconds(300);
  const auto start = Clock::now();
  double destroy_s = 0;
  std::string first, second;
  std::shared_ptr<const std::atomic<bool>> abandoned;
  {
    auto queue = std::make_unique<zt::nvme::IoQueue>(options);
    abandoned = queue->requests_abandoned();
    CHECK_FALSE(abandoned->load());
    std::promise<std::exception_ptr> stuck, after;
    zt::nvme::Transfer t;
    t.fd = fd;
    t.host = static_cast<uint8_t*>(memory);
    t.bytes = 4096;
    t.label = "read of 4096 bytes from the fifo";
    t.done = [&stuck](std::exception_ptr e) { stuck.set_value(e); };
    queue->enqueue(t);
    auto stuck_future = stuck.get_future();
    REQUIRE(stuck_future.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    first = error_text(stuck_future.get());
    // The read is still in the kernel, which may write into `memory` whenever it ends.
    CHECK(abandoned->load());
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    CHECK(waited >= 0.29);
    CHECK(waited < 5);

    t.label = "a later read";
    t.done = [&after](std::exception_ptr e) { after.set_value(e); };
    queue->enqueue(t);
    auto after_future = after.get_future();
    REQUIRE(after_future.wait_for(std::chrono::seconds(2)) == std::future_status::ready);
    second = error_text(after_future.get());
    // Destroyed with the stuck read still in the kernel: it must not wait for it forever.
    const auto destroy_start = Clock::now();
    queue.reset();
    destroy_s = std::chrono::duration<double>(Clock::now() - destroy_start).count();
  }
  INFO(first);
  INFO(second);
  CHECK(contains(first, "read of 4096 bytes from the fifo"));
  CHECK(contains(first, "did not complete within 0.3 s"));
  CHECK(contains(first, "file offset 0"));
  CHECK(contains(second, "a later read"));
  CHECK(contains(second, "stalled"));
  CHECK(destroy_s < 2);
  close(fd);
  zt::nvme::keep_forever(memory);  // as the tier keeps its host buffers once one was abandoned
}

TEST_CASE("transfers through a one-buffer pool wait for the buffer and still all complete") {
  zt::test::TempDir dir;
  const std::string path = dir.file("data.bin");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
  REQUIRE(fd >= 0);
  zt::nvme::IoQueueOptions options;
  options.queue_depth = 4;
  options.block_bytes = 8192;
  options.buffer_count = 1;
  options.buffer_bytes = 16384;
  std::vector<std::vector<uint8_t>> data, back;
  std::vector<std::promise<std::exception_ptr>> done(16);
  {
    zt::nvme::IoQueue queue(options);
    for (int i = 0; i < 8; ++i) {
      data.emplace_back(100001 + 1);
      for (size_t k = 0; k < data[i].size(); ++k) data[i][k] = static_cast<uint8_t>(k * 7 + i);
      zt::nvme::Transfer t;
      t.fd = fd;
      t.write = true;
      t.file_offset = i * 102400;
      t.host = data[i].data() + 1;  // unaligned: every byte goes through the single buffer
      t.bytes = 100001;
      t.label = "write " + std::to_string(i);
      t.done = [&done, i](std::exception_ptr e) { done[i].set_value(e); };
      queue.enqueue(t);
    }
    for (int i = 0; i < 8; ++i) {
      back.emplace_back(100001 + 1, 0);
      zt::nvme::Transfer t;
      t.fd = fd;
      t.file_offset = i * 102400;
      t.host = back[i].data() + 1;
      t.bytes = 100001;
      t.label = "read " + std::to_string(i);
      t.done = [&done, i](std::exception_ptr e) { done[8 + i].set_value(e); };
      queue.enqueue(t);
    }
    for (auto& d : done) {
      auto f = d.get_future();
      REQUIRE(f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
      CHECK(error_text(f.get()) == "");
    }
    CHECK(queue.pending_requests() == 0);
    CHECK_FALSE(queue.requests_abandoned()->load());  // the tier frees its buffers as usual
  }
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(std::equal(back[i].begin() + 1, back[i].end(), data[i].begin() + 1));
  }
  close(fd);
}

TEST_CASE("a write that finds its file system full names the error and the way out") {
  zt::test::TempDir dir;
  const zt::nvme_test::MountRun run = zt::nvme_test::in_private_mount(
      dir.path().string(), "tmpfs", 0, "size=1m", [](const std::string& mnt) {
        // Space that goes while a job runs (another process, a sparse file): here a plain file
        // on a 1 MiB file system, written 2 MiB.
        const std::string path = mnt + "/states.bin";
        const int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
        if (fd < 0) return "open " + path + ": " + std::strerror(errno);
        constexpr int64_t kBytes = 2 << 20;
        void* memory = nullptr;
        if (posix_memalign(&memory, 4096, kBytes) != 0) return std::string("posix_memalign");
        std::memset(memory, 7, kBytes);
        zt::nvme::IoQueueOptions options;
        options.buffer_count = 1;
        options.buffer_bytes = 1 << 20;
        std::string error;
        {
          zt::nvme::IoQueue queue(options);
          std::promise<std::exception_ptr> done;
          zt::nvme::Transfer t;
          t.fd = fd;
          t.write = true;
          t.host = static_cast<uint8_t*>(memory);
          t.bytes = kBytes;
          t.label = "write of 2 MiB";
          t.done = [&done](std::exception_ptr e) { done.set_value(e); };
          queue.enqueue(t);
          auto future = done.get_future();
          if (future.wait_for(std::chrono::seconds(20)) != std::future_status::ready)
            return std::string("the write did not end within 20 s");
          error = error_text(future.get());
        }
        close(fd);
        std::free(memory);
        const bool named = contains(error, "No space left on device") ||
                           contains(error, "wrote nothing (the file system is likely full)");
        const bool way_out = contains(error, "free space on that file system, or set "
                                             "plugin.offload_nvme.path to a folder on another");
        return named && way_out && contains(error, "write of 2 MiB") ? std::string("ok") : error;
      });
  if (!run.mounted) ZT_SKIP_UNLESS_CI("cannot mount a private file system here: " + run.text);
  CHECK(run.text == "ok");
}

TEST_CASE("io_uring: a kernel without the operations the queue sends (before 5.6) is named, "
          "not met with EINVAL on every request") {
  // Before 5.6 there is no probe at all.
  CHECK(zt::nvme::io_uring_lacks(nullptr) == "probe of its operations (READ, WRITE, ASYNC_CANCEL)");
  // This kernel's probe (CI's kernels are newer): nothing lacking, and a queue starts.
  io_uring_probe* here = io_uring_get_probe();
  REQUIRE(here != nullptr);
  CHECK(zt::nvme::io_uring_lacks(here) == "");
  io_uring_free_probe(here);
  // A 5.5 kernel's probe as it would read: operations up to ASYNC_CANCEL, without READ and
  // WRITE (IORING_OP_READ and _WRITE are later numbers).
  const size_t ops = IORING_OP_LAST;
  std::unique_ptr<void, decltype(&std::free)> memory(
      std::calloc(1, sizeof(io_uring_probe) + ops * sizeof(io_uring_probe_op)), &std::free);
  auto* old = static_cast<io_uring_probe*>(memory.get());
  old->last_op = IORING_OP_ASYNC_CANCEL;
  for (int op = 0; op <= IORING_OP_ASYNC_CANCEL; ++op) old->ops[op].flags = IO_URING_OP_SUPPORTED;
  CHECK(zt::nvme::io_uring_lacks(old) == "READ, WRITE");
  old->ops[IORING_OP_ASYNC_CANCEL].flags = 0;
  CHECK(zt::nvme::io_uring_lacks(old) == "READ, WRITE, ASYNC_CANCEL");
}
