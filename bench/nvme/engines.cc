// zt_bench_nvme's contestants (see engines.h).
#include "engines.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "common/shell.h"
#include "zt/error.h"
#include "zt/host/plugin_loader.h"
#include "zt/offload.h"
#include "zt/options.h"

namespace zt::bench {

namespace {

constexpr int64_t kBlock = 1 << 20;  // every contestant moves 1 MiB per request

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Bytes that neither compress nor repeat, the same for every run (splitmix64).
void fill_pattern(uint8_t* p, int64_t bytes) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(p + i, &z, 8);
  }
}

// A file of `bytes` with its blocks reserved, so timed writes overwrite rather than allocate.
int create_file(const std::string& path, int64_t bytes, int flags) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | flags, 0600);
  if (fd < 0) throw IoError("zt_bench_nvme: cannot create " + path + ": " + std::strerror(errno));
  const int rc = posix_fallocate(fd, 0, bytes);
  if (rc != 0) {
    close(fd);
    throw IoError("zt_bench_nvme: cannot reserve " + std::to_string(bytes) + " bytes for " + path +
                  ": " + std::strerror(rc) + "; pass a smaller --mib or another --dir");
  }
  return fd;
}

class OffloadNvmeEngine final : public Engine {
 public:
  OffloadNvmeEngine(const std::string& dir, int64_t bytes, int queue_depth) : bytes_(bytes) {
    static PluginCatalog catalog;
    const OffloadPlugin& plugin = catalog.offload("offload_nvme", "zt_bench_nvme");
    std::map<std::string, Value> values = {{"path", dir},
                                           {"queue_depth", int64_t{queue_depth}},
                                           {"block_kb", int64_t{kBlock / 1024}},
                                           {"direct", true}};
    OffloadContext context;
    context.role = "zt_bench_nvme";
    context.job = "bench" + std::to_string(getpid());
    tier_ = plugin.create(Options("plugin.offload_nvme", plugin.options(), values, {}), context);
    tier_->prepare(bytes);
    region_ = tier_->allocate("bench", bytes);
    // The tier's own aligned buffers: transfers go straight between them and the device.
    out_ = tier_->host_buffer(bytes);
    in_ = tier_->host_buffer(bytes);
    fill_pattern(static_cast<uint8_t*>(out_.data_ptr()), bytes);
    std::memset(in_.data_ptr(), 0, static_cast<size_t>(bytes));
  }

  double write() override {
    const auto start = Clock::now();
    tier_->write(region_, 0, out_.data_ptr(), bytes_)->wait();
    return seconds_since(start);
  }

  double read() override {
    const auto start = Clock::now();
    tier_->read(region_, 0, in_.data_ptr(), bytes_)->wait();
    return seconds_since(start);
  }

  bool verify() override {
    return std::memcmp(in_.data_ptr(), out_.data_ptr(), static_cast<size_t>(bytes_)) == 0;
  }

  std::string describe() const override { return tier_->describe(); }

 private:
  int64_t bytes_;
  std::unique_ptr<OffloadTier> tier_;
  int64_t region_ = 0;
  at::Tensor out_, in_;
};

class BufferedEngine final : public Engine {
 public:
  BufferedEngine(const std::string& dir, int64_t bytes)
      : path_(dir + "/buffered.bin"), bytes_(bytes), block_(kBlock) {
    fd_ = create_file(path_, bytes, 0);
    fill_pattern(block_.data(), kBlock);
  }
  ~BufferedEngine() override { close(fd_); }

  double write() override {
    const auto start = Clock::now();
    for (int64_t off = 0; off < bytes_; off += kBlock) {
      if (pwrite(fd_, block_.data(), kBlock, off) != kBlock) fail("pwrite");
    }
    if (fsync(fd_) != 0) fail("fsync");
    return seconds_since(start);
  }

  double read() override {
    // Cold, as the offloaded bytes would be: written back, then dropped from the page cache.
    if (fsync(fd_) != 0) fail("fsync");
    if (posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED) != 0) fail("posix_fadvise");
    const auto start = Clock::now();
    for (int64_t off = 0; off < bytes_; off += kBlock) {
      if (pread(fd_, block_.data(), kBlock, off) != kBlock) fail("pread");
    }
    return seconds_since(start);
  }

  std::string describe() const override {
    return "pwrite/pread of 1 MiB blocks on " + path_ +
           ", write timed with its fsync, read "
           "after fsync + POSIX_FADV_DONTNEED";
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw IoError(std::string("zt_bench_nvme: ") + what + " on " + path_ + ": " +
                  std::strerror(errno));
  }

  std::string path_;
  int64_t bytes_;
  std::vector<uint8_t> block_;
  int fd_ = -1;
};

class DdDirectEngine final : public Engine {
 public:
  DdDirectEngine(const std::string& dir, int64_t bytes)
      : path_(dir + "/dd.bin"), count_(std::to_string(bytes / kBlock)) {
    close(create_file(path_, bytes, 0));
    const ShellResult version = run_shell("dd --version");
    version_ = version.output.substr(0, version.output.find('\n'));
  }

  double write() override {
    return run_dd_seconds("if=/dev/zero of=" + shell_quote(path_) + " bs=1M count=" + count_ +
                          " oflag=direct conv=notrunc");
  }

  double read() override {
    return run_dd_seconds("if=" + shell_quote(path_) + " of=/dev/null bs=1M count=" + count_ +
                          " iflag=direct");
  }

  std::string describe() const override {
    return "dd bs=1M oflag=direct conv=notrunc from /dev/zero, iflag=direct to /dev/null (" +
           version_ + ")";
  }

 private:
  std::string path_;
  std::string count_;
  std::string version_;
};

}  // namespace

std::unique_ptr<Engine> make_engine(const std::string& name, const std::string& dir, int64_t bytes,
                                    int queue_depth) {
  if (name == kOffloadNvme) return std::make_unique<OffloadNvmeEngine>(dir, bytes, queue_depth);
  if (name == kBuffered) return std::make_unique<BufferedEngine>(dir, bytes);
  if (name == kDdDirect) return std::make_unique<DdDirectEngine>(dir, bytes);
  throw InternalError("zt_bench_nvme: no engine named " + name);
}

}  // namespace zt::bench
