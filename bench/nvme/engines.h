// zt_bench_nvme's contestants: three ways to write a file of `bytes` and read it back, each on
// its own file in the same folder, each timing one whole write or read.
//   offload_nvme  the plugin, loaded through zt::PluginCatalog as the engine loads it: 1 MiB
//                 requests, queue depth 8, O_DIRECT, one transfer from an aligned host buffer
//   buffered      pwrite of 1 MiB blocks + fsync (the fsync timed); pread of 1 MiB blocks after
//                 the file's pages were dropped from the page cache (fsync + POSIX_FADV_DONTNEED)
//   dd_direct     `dd bs=1M oflag=direct` from /dev/zero / `iflag=direct` to /dev/null, a child
//                 process; its own reported time (process start-up not counted)
// Every file is preallocated the same way and overwritten in place, so no contestant pays for
// block allocation in its timing. Thread safety: none; one thread runs the bench.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace zt::bench {

constexpr const char* kOffloadNvme = "offload_nvme";
constexpr const char* kBuffered = "buffered";
constexpr const char* kDdDirect = "dd_direct";
constexpr const char* kEngines[] = {kOffloadNvme, kBuffered, kDdDirect};

class Engine {
 public:
  virtual ~Engine() = default;
  // Seconds to write all bytes (durably for buffered: fsync included).
  virtual double write() = 0;
  // Seconds to read all bytes back, none of them from the page cache.
  virtual double read() = 0;
  // Whether the bytes read last equal the bytes written; engines that cannot tell return true.
  virtual bool verify() { return true; }
  // One line on how it runs, for the report.
  virtual std::string describe() const = 0;
};

std::unique_ptr<Engine> make_engine(const std::string& name, const std::string& dir, int64_t bytes,
                                    int queue_depth);

}  // namespace zt::bench
