#include "nvme_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "aligned_pool.h"
#include "file_util.h"
#include "rank_folder_owner.h"
#include "zt/bytes.h"
#include "zt/error.h"

namespace zt::nvme {

namespace {

// The smallest alignment O_DIRECT needs on any device worth offloading to; devices with larger
// logical blocks raise it.
constexpr int64_t kMinAlignment = 4096;

// A transfer's handle. A wait that runs out while the transfer is still queued or in flight
// marks the queue's requests abandoned: the caller then drops what it handed over (the engine
// frees a fetched host_buffer), and that memory must outlive a kernel that may still write
// into it.
class TierWork final : public IoWork {
 public:
  TierWork(std::string what, std::chrono::milliseconds timeout,
           std::shared_ptr<std::atomic<bool>> abandoned)
      : IoWork(std::move(what), timeout), abandoned_(std::move(abandoned)) {}
  using IoWork::wait;
  void wait(std::chrono::milliseconds timeout) override {
    try {
      IoWork::wait(timeout);
    } catch (const IoError&) {
      if (!is_completed()) abandoned_->store(true);
      throw;
    }
  }

 private:
  std::shared_ptr<std::atomic<bool>> abandoned_;
};

// How a user moves the files elsewhere; quoted at the end of most errors.
const char* kWayOutPath =
    "set plugin.offload_nvme.path to a writable folder on a local disk with room "
    "(--set plugin.offload_nvme.path=/mnt/nvme0/zt)";

std::string mib_text(int64_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                : std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

NvmeTier::File::~File() {
  if (fd >= 0) close(fd);
}

NvmeTier::NvmeTier(const NvmeConfig& config, const OffloadContext& context)
    : config_(config), context_(context), direct_(config.direct) {
  const std::string& job = context_.job;
  if (job.empty() || job == "." || job == ".." || job.find('/') != std::string::npos ||
      job.find('\0') != std::string::npos) {
    throw InternalError("offload_nvme: the job name '" + job +
                        "' cannot be a folder name (it must be non-empty, without '/'); the "
                        "engine passes OffloadContext::job");
  }
  job_dir_ = (std::filesystem::path(config_.path) / ("zt-" + job)).string();
  rank_dir_ = (std::filesystem::path(job_dir_) / ("rank" + std::to_string(context_.rank))).string();
  alignment_ = std::max(kMinAlignment, logical_block_size(config_.path));
  if (config_.block_bytes % alignment_ != 0) {
    throw ConfigError(config_.block_kb_where + ": plugin.offload_nvme.block_kb = " +
                      std::to_string(config_.block_bytes / 1024) + " is not a multiple of the " +
                      std::to_string(alignment_) + "-byte block O_DIRECT needs under " +
                      config_.path + "; use a multiple of " + std::to_string(alignment_ / 1024) +
                      " KiB");
  }
  if (!direct_) buffered_reason_ = "buffered: direct = false";
  IoQueueOptions q;
  q.queue_depth = config_.queue_depth;
  q.block_bytes = config_.block_bytes;
  q.alignment = alignment_;
  q.buffer_count = config_.buffer_count;
  q.buffer_bytes = round_up(config_.buffer_bytes, alignment_);
  q.request_timeout = config_.request_timeout;
  queue_ = std::make_unique<IoQueue>(q);
}

NvmeTier::~NvmeTier() {
  // Waits for (or fails) transfers still queued, so no request touches a file removed below.
  queue_.reset();
  remove_files_and_folders();
}

void NvmeTier::remove_files_and_folders() noexcept {
  for (auto& [id, region] : regions_) unlink(region.path.c_str());
  regions_.clear();
  release_rank_folder(owner_);
  // Only the folder this tier made: before make_folder, rank_dir_ is the name another tier of
  // the same rank (or a killed rank's leftovers) may hold, and removing it while empty took
  // that tier's folder from under it. Only one still holding something is worth a word.
  if (folder_made_ && rmdir(rank_dir_.c_str()) != 0 && errno == ENOTEMPTY) {
    std::fprintf(stderr, "offload_nvme: note: could not remove %s: %s (files not made by zt?)\n",
                 rank_dir_.c_str(), errno_text(errno).c_str());
  }
  // Other ranks may still have their folders in the job's; the last one out removes it.
  rmdir(job_dir_.c_str());
}

std::string NvmeTier::describe() const {
  std::string io = direct_ ? "O_DIRECT" : buffered_reason_;
  return "files under " + rank_dir_ + " (" + io + ", io_uring queue depth " +
         std::to_string(config_.queue_depth) + ", " + std::to_string(config_.buffer_count) + " x " +
         mib_text(config_.buffer_bytes) + " buffers)";
}

std::string NvmeTier::who() const {
  const std::string rank = "rank " + std::to_string(context_.rank);
  return context_.role.empty() ? rank : context_.role + " on " + rank;
}

std::string NvmeTier::step_text() const {
  return step_ < 0 ? "before the first step" : "at step " + std::to_string(step_);
}

void NvmeTier::make_folder() {
  if (folder_made_) return;
  remove_dead_ranks_folders();
  make_job_folder();
  // The rank's folder is made here, by this tier alone: another tier of the same job and rank
  // (a second engine of one Python process on the same path) or a killed rank's leftovers hold
  // rank<r>, and then this tier takes rank<r>.2, .3, ... Two tiers in one folder truncated and
  // then removed each other's files.
  const std::string base = rank_dir_;
  int remade_job_folder = 0;
  for (int n = 1;; ++n) {
    const std::string dir = n == 1 ? base : base + "." + std::to_string(n);
    if (mkdir(dir.c_str(), 0777) == 0) {
      rank_dir_ = dir;
      folder_made_ = true;
      owner_ = claim_rank_folder(rank_dir_);
      return;
    }
    // The job's folder went between the two mkdirs: another rank's tier, ending, removed it
    // while it was empty (the last one out does). Made again, the same name is tried again.
    if (errno == ENOENT && remade_job_folder < 10) {
      ++remade_job_folder;
      make_job_folder();
      --n;
      continue;
    }
    if (errno != EEXIST || n == 1000) {
      throw IoError("offload_nvme: cannot create the offload folder " + dir + " for " + who() +
                    ": " + errno_text(errno) + "; " + kWayOutPath);
    }
  }
}

void NvmeTier::remove_dead_ranks_folders() {
  for (const RemovedFolder& folder : remove_dead_owners_folders(config_.path)) {
    std::fprintf(stderr,
                 "offload_nvme: removed %s (%s), the offload folder of %s, which ended without "
                 "removing it (killed)\n",
                 folder.path.c_str(), bytes_text(folder.bytes).c_str(),
                 folder.owner.empty() ? "a rank" : folder.owner.c_str());
  }
  std::fflush(stderr);
}

void NvmeTier::make_job_folder() {
  std::error_code ec;
  std::filesystem::create_directories(job_dir_, ec);
  if (ec) {
    // The job's folder is what failed (the rank's inside it was never tried), and the folder
    // above it that exists is where the user looks: unwritable, or a file in the way.
    std::filesystem::path existing = std::filesystem::path(job_dir_).parent_path();
    std::error_code ignored;
    while (!existing.empty() && !std::filesystem::exists(existing, ignored))
      existing = existing.parent_path();
    throw IoError("offload_nvme: cannot create the offload folder " + job_dir_ + " for " + who() +
                  ": " + ec.message() + " (the nearest path above it that exists: " +
                  (existing.empty() ? std::string(".") : existing.string()) + "); " + kWayOutPath);
  }
}

void NvmeTier::refuse_direct(const std::string& syscall, int error_number) {
  direct_ = false;
  const std::string fs = file_system_name(rank_dir_);
  buffered_reason_ = "buffered: O_DIRECT refused by " + fs;
  // One line per tier, here at the probe: every later file is simply opened without O_DIRECT.
  std::fprintf(stderr,
               "offload_nvme: note: %s (%s) refuses O_DIRECT (%s: %s); %s uses buffered I/O "
               "there, through the page cache; put plugin.offload_nvme.path on a local disk, or "
               "set plugin.offload_nvme.direct=false to silence this\n",
               rank_dir_.c_str(), fs.c_str(), syscall.c_str(), errno_text(error_number).c_str(),
               context_.role.empty() ? "offload_nvme" : context_.role.c_str());
  std::fflush(stderr);
}

int NvmeTier::open_region_file(const std::string& path) {
  // O_EXCL: the folder is this tier's alone, so a file already there is another program's.
  const int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
  int fd = open(path.c_str(), flags | (direct_ ? O_DIRECT : 0), 0600);
  if (fd < 0 && errno == EINVAL && direct_) {
    refuse_direct("open", EINVAL);
    // Some file systems create the file before refusing O_DIRECT: it is this tier's own.
    unlink(path.c_str());
    fd = open(path.c_str(), flags, 0600);
  }
  return fd;
}

void NvmeTier::probe() {
  // A real file, written and read back the way regions will be, so a read-only mount, a full
  // disk or a file system refusing O_DIRECT shows up now and not at the first offload.
  const std::string path = (std::filesystem::path(rank_dir_) / ".zt-probe").string();
  auto fail = [&](const std::string& what, int err) {
    unlink(path.c_str());
    throw IoError("offload_nvme: cannot " + what + " " + path +
                  " (probing the offload folder for " + who() + "): " + errno_text(err) + "; " +
                  kWayOutPath);
  };
  std::unique_ptr<uint8_t, decltype(&std::free)> out(
      aligned_alloc_or_throw(alignment_, alignment_, "the probe", "free host memory"), &std::free);
  std::unique_ptr<uint8_t, decltype(&std::free)> in(
      aligned_alloc_or_throw(alignment_, alignment_, "the probe", "free host memory"), &std::free);
  for (int64_t i = 0; i < alignment_; ++i) out.get()[i] = static_cast<uint8_t>(i * 131 + 7);
  File file;
  file.fd = open_region_file(path);
  if (file.fd < 0) fail("create", errno);
  ssize_t n = pwrite(file.fd, out.get(), alignment_, 0);
  if (n < 0 && errno == EINVAL && direct_) {
    // Some file systems (FUSE, some network ones) open with O_DIRECT and refuse the I/O itself.
    refuse_direct("write", EINVAL);
    close(file.fd);
    file.fd = open(path.c_str(), O_RDWR | O_TRUNC | O_CLOEXEC);
    if (file.fd < 0) fail("reopen", errno);
    n = pwrite(file.fd, out.get(), alignment_, 0);
  }
  if (n != alignment_) fail("write", n < 0 ? errno : ENOSPC);
  n = pread(file.fd, in.get(), alignment_, 0);
  if (n != alignment_) fail("read back", n < 0 ? errno : EIO);
  if (std::memcmp(in.get(), out.get(), alignment_) != 0) fail("read back the same bytes from", EIO);
  if (unlink(path.c_str()) != 0) fail("remove", errno);
}

void NvmeTier::prepare(int64_t total_bytes) {
  if (total_bytes < 0) {
    throw InternalError("offload_nvme: prepare() called with " + std::to_string(total_bytes) +
                        " bytes");
  }
  make_folder();
  probe();
  const int64_t free = free_bytes(rank_dir_);
  if (free < 0) {
    throw IoError("offload_nvme: cannot tell the free space under " + rank_dir_ +
                  " (statvfs: " + errno_text(errno) + "); " + kWayOutPath);
  }
  if (free < total_bytes) {
    // The share offloaded is set per role: plugins.offload_optimizer ->
    // zero.offload_optimizer_fraction.
    const std::string role_key = context_.role.rfind("plugins.", 0) == 0 ? context_.role.substr(8)
                                                                         : "";
    const std::string role = role_key.empty()
                                 ? " (lower the zero.offload_*_fraction of the role using it)"
                                 : " (lower zero." + role_key + "_fraction)";
    throw IoError("offload_nvme: not enough room under " + rank_dir_ + " (" +
                  file_system_name(rank_dir_) + ") for " + who() + ": " + bytes_text(total_bytes) +
                  " needed, " + bytes_text(free) +
                  " free; set plugin.offload_nvme.path to a folder on a bigger filesystem "
                  "(--set plugin.offload_nvme.path=...), free space there, or offload less to "
                  "this tier" +
                  role + other_jobs_note());
  }
  prepared_ = true;
}

std::string NvmeTier::other_jobs_note() const {
  // Another job's folders beside this one: a running job's, or one this tier could not judge
  // (another machine's, one without an owner file); those of ranks killed on this machine went
  // in make_folder.
  std::string note;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(config_.path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("zt-", 0) != 0 || entry.path() == job_dir_ || !entry.is_directory(ec)) continue;
    int64_t bytes = 0;
    for (const auto& f : std::filesystem::recursive_directory_iterator(entry.path(), ec)) {
      if (f.is_regular_file(ec)) bytes += static_cast<int64_t>(f.file_size(ec));
    }
    note += (note.empty() ? "" : ", ") + name + " (" + bytes_text(bytes) + ")";
  }
  if (note.empty()) return "";
  return "; other jobs' offload folders hold space there: " + note +
         " (running jobs', other machines', or older zt's: remove those no job uses)";
}

void NvmeTier::ensure_prepared() {
  if (!prepared_) prepare(0);
}

int64_t NvmeTier::allocate(const std::string& name, int64_t bytes) {
  if (bytes < 0) {
    throw InternalError("offload_nvme: allocate('" + name + "', " + std::to_string(bytes) +
                        ") with a negative size");
  }
  ensure_prepared();
  const int64_t id = next_region_++;
  Region region;
  region.name = name;
  region.bytes = round_up(bytes, alignment_);
  region.path = (std::filesystem::path(rank_dir_) /
                 (sanitize_file_name(name) + "-" + std::to_string(id) + ".bin"))
                    .string();
  region.file = std::make_shared<File>();
  region.file->fd = open_region_file(region.path);
  if (region.file->fd < 0) {
    const int error_number = errno;
    // Each region keeps its file open for the job: out of descriptors, another folder cannot
    // help; fewer regions or a higher limit do.
    const bool out_of_files = error_number == EMFILE || error_number == ENFILE;
    throw IoError("offload_nvme: cannot create " + region.path + " for region '" + name + "' " +
                  step_text() + ": " + errno_text(error_number) + "; " +
                  (out_of_files ? "every offloaded group keeps 4-5 files open (master, states, "
                                  "gradient, stage-3 parameters): raise the open-file limit "
                                  "(ulimit -n, or LimitNOFILE for a service), or offload fewer, "
                                  "larger groups (shard_bucket)"
                                : kWayOutPath));
  }
  if (region.bytes > 0) {
    int rc = posix_fallocate(region.file->fd, 0, region.bytes);
    if (rc == EOPNOTSUPP || rc == EINVAL) {
      // No fallocate in this file system, and glibc's emulation cannot write through O_DIRECT:
      // size the file without reserving blocks (a full disk then fails at a write, named).
      rc = ftruncate(region.file->fd, region.bytes) == 0 ? 0 : errno;
      if (rc == 0 && !unreserved_noted_) {
        unreserved_noted_ = true;  // one line per tier: the user learns the disk is not held
        std::fprintf(stderr,
                     "offload_nvme: note: %s (%s) cannot reserve blocks (no fallocate): a disk "
                     "that fills during the run stops the job at that step, naming the file; "
                     "keep room on it, or put plugin.offload_nvme.path on a local disk\n",
                     rank_dir_.c_str(), file_system_name(rank_dir_).c_str());
        std::fflush(stderr);
      }
    }
    if (rc != 0) {
      // Closed and removed first: ext4 and XFS hold the blocks of a failed reservation until
      // then, and the free space said would be short by them.
      region.file.reset();
      unlink(region.path.c_str());
      const int64_t free = free_bytes(rank_dir_);
      throw IoError("offload_nvme: cannot reserve " + bytes_text(region.bytes) + " for region '" +
                    name + "' in " + region.path + " " + step_text() + ": " + errno_text(rc) +
                    (free >= 0 ? "; " + bytes_text(free) + " free on " + file_system_name(rank_dir_)
                               : std::string()) +
                    "; " + kWayOutPath);
    }
  }
  bytes_allocated_ += region.bytes;
  regions_.emplace(id, std::move(region));
  return id;
}

void NvmeTier::release(int64_t region) {
  const Region& r = region_of(region, "release");
  unlink(r.path.c_str());
  bytes_allocated_ -= r.bytes;
  regions_.erase(region);  // the descriptor closes when transfers still using it finish
}

const NvmeTier::Region& NvmeTier::region_of(int64_t region, const char* op) const {
  auto it = regions_.find(region);
  if (it == regions_.end()) {
    throw InternalError("offload_nvme: " + std::string(op) + " of region " +
                        std::to_string(region) + ", which is not allocated (released already?)");
  }
  return it->second;
}

std::shared_ptr<Work> NvmeTier::write(int64_t region, int64_t offset, const void* host,
                                      int64_t bytes) {
  // The queue only reads from `host` for a write; one code path serves both directions.
  return transfer(true, region, offset, const_cast<void*>(host), bytes);
}

std::shared_ptr<Work> NvmeTier::read(int64_t region, int64_t offset, void* host, int64_t bytes) {
  return transfer(false, region, offset, host, bytes);
}

std::shared_ptr<Work> NvmeTier::transfer(bool write, int64_t region, int64_t offset, void* host,
                                         int64_t bytes) {
  const char* op = write ? "write" : "read";
  const Region& r = region_of(region, op);
  if (offset < 0 || offset % alignment_ != 0 || bytes < 0 ||
      offset + round_up(bytes, alignment_) > r.bytes || (!host && bytes > 0)) {
    throw InternalError("offload_nvme: " + std::string(op) + " of " + std::to_string(bytes) +
                        " bytes at offset " + std::to_string(offset) + " of region '" + r.name +
                        "' (" + std::to_string(r.bytes) + " bytes, host " +
                        (host ? "set" : "null") + "): offsets must be multiples of " +
                        std::to_string(alignment_) + " and the rounded-up range inside the region");
  }
  const std::string label = "offload_nvme: " + std::string(op) + " of " + std::to_string(bytes) +
                            " bytes at offset " + std::to_string(offset) + " of region '" + r.name +
                            "' (file " + r.path + ") " + step_text() + " on rank " +
                            std::to_string(context_.rank);
  // Each request completes or fails within request_timeout of its submission and at most
  // queue_depth run at once, so this bounds the wait for everything queued ahead plus this.
  const int64_t rounds = (queue_->pending_requests() + queue_->requests_for(bytes)) /
                         config_.queue_depth;
  const auto timeout = config_.request_timeout * (2 + rounds);
  auto work = std::make_shared<TierWork>(label, timeout, queue_->abandonment_flag());
  std::shared_ptr<Counters> counters = counters_;
  auto done = [counters, work, write, bytes](std::exception_ptr error) {
    if (!error) {
      (write ? counters->bytes_written : counters->bytes_read) += bytes;
      ++(write ? counters->writes : counters->reads);
    }
    work->complete(error);
  };
  if (bytes == 0) {
    done(nullptr);  // nothing to move: complete now rather than wake the I/O thread
    return work;
  }
  Transfer t;
  t.fd = r.file->fd;
  t.write = write;
  t.file_offset = offset;
  t.host = static_cast<uint8_t*>(host);
  t.bytes = bytes;
  t.label = label;
  t.done = std::move(done);
  t.keep_alive = r.file;
  queue_->enqueue(std::move(t));
  return work;
}

at::Tensor NvmeTier::host_buffer(int64_t bytes) {
  if (bytes < 0) {
    throw InternalError("offload_nvme: host_buffer(" + std::to_string(bytes) + ")");
  }
  const int64_t size = round_up(bytes, alignment_);
  uint8_t* p = aligned_alloc_or_throw(
      size, alignment_, "a host buffer",
      "free host memory, or offload less to this tier (lower zero.offload_*_fraction, or "
      "zero.prefetch_units for parameters fetched ahead)");
  // Not pinned: this build has no CUDA (context.cuda is ignored until a CUDA build adds it).
  // Kept forever once a request was abandoned: the kernel may still write into it.
  return at::from_blob(
      p, {size},
      [abandoned = queue_->requests_abandoned()](void* q) {
    if (abandoned->load()) keep_forever(q);
    else std::free(q);
      },
      at::TensorOptions().dtype(at::kByte));
}

void NvmeTier::check() {
  for (const auto& [id, r] : regions_) {
    struct stat st;
    const std::string where = "region '" + r.name + "' file " + r.path + " (" +
                              std::to_string(r.bytes) + " bytes) on rank " +
                              std::to_string(context_.rank);
    const std::string way_out =
        "; leave " + rank_dir_ +
        " alone while a job runs; this step was not applied, so rerun the job";
    if (fstat(r.file->fd, &st) != 0) {
      throw IoError("offload_nvme: cannot stat " + where + " " + step_text() + ": " +
                    errno_text(errno) + way_out);
    }
    if (st.st_nlink == 0) {
      throw IoError("offload_nvme: " + where + " was deleted under a running job " + step_text() +
                    way_out);
    }
    if (st.st_size < r.bytes) {
      throw IoError("offload_nvme: " + where + " was truncated from " + std::to_string(r.bytes) +
                    " to " + std::to_string(st.st_size) + " bytes under a running job " +
                    step_text() + way_out);
    }
  }
}

OffloadStats NvmeTier::stats() const {
  OffloadStats s;
  s.bytes_allocated = bytes_allocated_;
  s.bytes_written = counters_->bytes_written.load();
  s.bytes_read = counters_->bytes_read.load();
  s.writes = counters_->writes.load();
  s.reads = counters_->reads.load();
  s.staging_bytes = queue_->staging_bytes();
  return s;
}

}  // namespace zt::nvme
