// NvmeTier: the OffloadTier of offload_nvme. Each region is one preallocated file in this rank's
// folder <path>/zt-<job>/rank<rank>/, read and written with O_DIRECT through an IoQueue (one
// io_uring and its I/O thread), so offloaded bytes bypass the page cache and cost no host memory
// beyond the fixed bounce-buffer pool. The tier removes its files and folders when destroyed,
// also while an exception unwinds (the trainer catches it, so destructors run); after a killed
// job the trainer removes <path>/zt-<job> itself, which is why that layout is fixed, and where
// no zt launcher ran (torchrun, srun) the next tier on the path removes the killed rank's folder
// (rank_folder_owner.h).
// Thread safety: as OffloadTier: every call from the training thread; Work completes on the
// I/O thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "io_uring_queue.h"
#include "zt/file_lock.h"
#include "zt/offload.h"

namespace zt::nvme {

// The plugin's options, read once in create() (see offload_nvme.cc for what each trades).
struct NvmeConfig {
  std::string path = "runs/nvme";
  int queue_depth = 8;
  int buffer_count = 4;
  int64_t buffer_bytes = 16 << 20;
  int64_t block_bytes = 1 << 20;
  std::string block_kb_where;  // where block_kb was set (file:line), for its error
  bool direct = true;
  // A request that takes longer has met a stalled device: its transfer fails with an IoError.
  std::chrono::milliseconds request_timeout{60000};
};

class NvmeTier final : public OffloadTier {
 public:
  // Throws ConfigError for a block size that is not a multiple of alignment(), InternalError for
  // a job name that cannot be a folder name, IoError when io_uring or memory is unavailable.
  NvmeTier(const NvmeConfig& config, const OffloadContext& context);
  ~NvmeTier() override;

  std::string describe() const override;
  void prepare(int64_t total_bytes) override;
  int64_t allocate(const std::string& name, int64_t bytes) override;
  void release(int64_t region) override;
  void* address(int64_t) override { return nullptr; }  // files are not addressable
  std::shared_ptr<Work> write(int64_t region, int64_t offset, const void* host,
                              int64_t bytes) override;
  std::shared_ptr<Work> read(int64_t region, int64_t offset, void* host, int64_t bytes) override;
  at::Tensor host_buffer(int64_t bytes) override;
  int64_t alignment() const override { return alignment_; }
  void check() override;
  void set_step(int64_t step) override { step_ = step; }
  OffloadStats stats() const override;

  // This rank's folder, as the messages spell it.
  const std::string& rank_dir() const { return rank_dir_; }
  // Whether transfers bypass the page cache (false after a buffered fallback or direct = false).
  bool direct_io() const { return direct_; }

 private:
  // An open region file. Transfers hold it too, so a region released while I/O is in flight
  // keeps its descriptor until the last transfer finished.
  struct File {
    int fd = -1;
    ~File();
  };
  struct Region {
    std::string name;
    std::string path;
    int64_t bytes = 0;  // rounded to alignment
    std::shared_ptr<File> file;
  };

  void ensure_prepared();
  // Removes (and says so on stderr) the rank folders under the path whose owner was killed.
  void remove_dead_ranks_folders();
  void make_folder();
  // Creates job_dir_ (and the folders above it) where missing; IoError with the way out.
  void make_job_folder();
  // "; other jobs' offload folders hold space there: zt-... (4.0 GiB), ..." or "".
  std::string other_jobs_note() const;
  void probe();
  void refuse_direct(const std::string& syscall, int error_number);
  int open_region_file(const std::string& path);
  std::string step_text() const;
  std::string who() const;  // "plugins.offload_optimizer on rank 0", for messages
  const Region& region_of(int64_t region, const char* op) const;
  std::shared_ptr<Work> transfer(bool write, int64_t region, int64_t offset, void* host,
                                 int64_t bytes);
  void remove_files_and_folders() noexcept;

  NvmeConfig config_;
  OffloadContext context_;
  std::string job_dir_;
  std::string rank_dir_;      // <job_dir_>/rank<r>, or rank<r>.<n> when that was taken
  bool folder_made_ = false;  // make_folder claimed rank_dir_
  // The lock on rank_dir_'s owner file, held while the tier lives (rank_folder_owner.h).
  std::unique_ptr<ExclusiveFileLock> owner_;
  int64_t alignment_ = 4096;
  bool direct_ = true;
  std::string buffered_reason_;    // why I/O is buffered, for describe()
  bool unreserved_noted_ = false;  // said once that this file system reserves no blocks
  bool prepared_ = false;
  int64_t step_ = -1;

  std::map<int64_t, Region> regions_;
  int64_t next_region_ = 1;
  int64_t bytes_allocated_ = 0;

  // Updated on the I/O thread as transfers complete.
  struct Counters {
    std::atomic<int64_t> bytes_written{0}, bytes_read{0}, writes{0}, reads{0};
  };
  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();

  std::unique_ptr<IoQueue> queue_;  // destroyed first (in the destructor), before the files
};

}  // namespace zt::nvme
