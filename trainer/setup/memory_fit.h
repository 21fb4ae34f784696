// The memory-fit check: before any rank starts (or as each rank starts, under torchrun, mpirun or
// srun), how many bytes this job needs in every tier of a host, host RAM per local rank and each
// file tier's folder, against what the host has. A job that does not fit is refused with a
// ConfigError that names, for each tier, the bytes it needs, the bytes it has and the knobs that
// move them (with the file:line of each key), so a job the check accepts does not run out of memory
// and one it refuses would have. The estimate counts what the engine and its tiers allocate
// (docs/architecture.md, "Memory fit"): the process itself, model states by placement
// (memory_theory.h), the stage-3 working set, activations, the streamed-update buffers, the
// parameter fetch buffers and the tiers' own pools.
// memory_fit.cc estimates; memory_fit_check.cc compares with the host and words the refusal.
// Thread safety: pure functions, except check_memory_fits and file_tier_free_bytes, which read
// /proc/meminfo and statvfs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"
#include "settings/job_settings.h"
#include "setup/memory_theory.h"

namespace zt::trainer {

// Resident memory of one rank before its model: LibTorch, OpenBLAS, UCX (its 4 MiB shared-memory
// window), the plugins, the allocator's arenas, the training loop's small tensors. Measured here
// (Debian LibTorch 1.13, OpenBLAS 0.3.21, 2 cores): the trainer on configs/zero3.toml with a GPT
// of 2 blocks of d_model 64 (118,528 parameters: < 2 MiB of model states and activations), 3
// steps: the summary's peak RSS (VmHWM) was 178-180 MiB per rank with 1, 2 or 3 ranks, at stage
// 0 or 3, with and without both offloads in offload_nvme. Rounded up, since a check that guesses
// low lets a job run out of memory.
constexpr int64_t kProcessBaselineBytes = int64_t{192} << 20;
// The same measurement unrounded: what the expected peak (HostNeed::expected) counts.
constexpr int64_t kProcessMeasuredBytes = int64_t{180} << 20;
// The same for ranks that zt's launcher forks from one start (trainer --nproc N on one host:
// LaunchSpec::fork_ranks): 104-106 MiB with 2 or 3 ranks. A forked rank counts as its own only
// the library pages it touches after the fork; the host holds the rest once for all ranks. The
// check keeps kProcessBaselineBytes for them too (it guesses high, as it must).
constexpr int64_t kForkedProcessMeasuredBytes = int64_t{106} << 20;

// The model and the job as the estimate sees them: sizes in elements, decided by the config and
// the model's declarations (never by building it).
struct FitInputs {
  int world = 1;  // ranks of the job (N)
  // zt's launcher forks them from one start (kForkedProcessMeasuredBytes)
  bool forked_ranks = false;
  int shard_world = 1;  // ranks one shard group splits states over: N, or k with MiCS
  int local_ranks = 1;  // ranks of this host: they share its RAM and disks
  int stage = 0;
  int64_t element_size = 4;         // compute dtype
  int64_t grad_accum = 1;           // micro steps a step (stages 0-1 sum 16-bit ones in fp32)
  int64_t optimizer_states = 2;     // the optimizer's arrays per element beside the master
  int64_t state_element_size = 4;   // bytes per element of each (optimizer_footprint)
  int64_t master_element_size = 4;  // bytes per element of the master (optimizer_footprint)
  // The model.
  int64_t parameters = 0;
  int64_t largest_unit = 0;    // elements one unit gathers (owned and borrowed)
  int64_t largest_owned = 0;   // elements one unit owns: bounds its groups and their shards
  int64_t largest_untied = 0;  // elements one unit uses that no other unit does
  int64_t largest_window = 0;  // stage 3: elements gathered at once (a unit + its prefetch)
  int64_t fetch_units = 0;     // stage 3: unit shards read ahead from a file tier at once
  int64_t tied = 0;            // elements used by a later unit too: their .grad lives all backward
  int64_t persistent = 0;      // stage 3: elements of tensors below param_persistence_threshold
  int64_t tensors = 0;         // parameter tensors: at least one flat group each at most
  int64_t groups = 0;          // flat groups when a strategy's plan is known (0: tensors bound it)
  int64_t largest_tensor = 0;
  int64_t activation_bytes = 0;  // saved for backward by one micro batch, plus its peak extra
  // Placement (shares of bytes, as the offload fractions place them).
  StatePlacement states;
  bool params_streamed = false;  // stage 3 parameter shards in a file tier
  // Streaming (zero.sub_group_size, pipelines) and buffers.
  int64_t sub_group_size = 1000000000;
  int pipeline_sets = 3;             // 1 + pipeline_read + pipeline_write
  int64_t reduce_bucket_bytes = 0;   // gradient bytes in flight (overlap_comm), 0 without
  int64_t tier_pool_bytes = 0;       // every file tier's own buffers, per rank
  int64_t checkpoint_bytes = 0;      // host bytes an asynchronous save snapshots
  int64_t codec_residual_bytes = 0;  // a gradient codec's error feedback: fp32, the whole model
  int64_t codec_staging_bytes = 0;   // the coded collectives' kept buffers (codec_staging)
  int64_t alignment = 4096;          // file tiers' block: each array is rounded up to it
  bool init_from = false;            // model.init_from: a file's weights written after the build
  int64_t loaded_model_bytes = 0;    // a TorchScript file's values, held while the engine is built
};

// One rank's host memory at its peak, by what it is for.
struct HostNeed {
  int64_t process = 0;           // kProcessBaselineBytes
  int64_t process_measured = 0;  // kProcessMeasuredBytes, or kForkedProcessMeasuredBytes
  int64_t model_states = 0;      // StateBytes::host()
  int64_t construction = 0;      // the model being built
  int64_t params_gathered = 0;   // stage 3: the prefetch window and persistent groups
  int64_t grads = 0;  // .grad tensors, flat gradient buffers, reductions in flight, the norm
  int64_t activations = 0;
  int64_t staging = 0;     // streamed tile sets and stage-3 parameter fetch buffers
  int64_t tier_pools = 0;  // file tiers' own buffers
  int64_t checkpoint = 0;  // a save's staging buffer and an asynchronous save's snapshot
  int64_t allocator = 0;   // heap fragmentation under the working set's short-lived tensors
  int64_t working_set() const {
    return params_gathered + grads + activations + staging + checkpoint;
  }
  // Construction comes before the working set; the trainer returns freed blocks of 4 MiB and
  // more to the system (trainer/app/main.cc), so the larger of the two counts.
  int64_t total() const {
    return process + model_states + tier_pools + std::max(construction, working_set()) + allocator;
  }
  // The peak a run is expected to measure (its VmHWM): total() without what the check adds to be
  // safe, the allocator's slack and the process baseline's rounding up. trainer estimate prints
  // both; tests/multiproc/estimate_test.cc checks this one against runs.
  int64_t expected() const { return total() - allocator - (process - process_measured); }
};

// The allocator's share: blocks under the trainer's 4 MiB mmap threshold stay on glibc's heap
// when freed and fragment it; a tenth of the working set covers what was measured
// (docs/architecture.md, "Memory fit").
constexpr int64_t kAllocatorSlackPercent = 10;

// What one rank puts in one file tier's folder.
struct DiskNeed {
  std::string plugin;      // the offload plugin ("offload_nvme")
  std::string path;        // its folder (plugin.<id>.path)
  std::string path_where;  // where the path was set ("configs/x.toml:40:1", "default")
  std::string roles;       // "optimizer states + master", "parameter shards", or both
  int64_t per_rank = 0;
};

struct FitEstimate {
  FitInputs inputs;
  StateBytes state_bytes;     // per rank
  HostNeed host;              // per rank
  int64_t tile_elements = 0;  // the streamed tile; 0 when nothing is streamed
  std::vector<DiskNeed> disks;
  int64_t host_total() const { return host.total() * inputs.local_ranks; }
};

// What a host has: RAM for the job's ranks and free space at each file tier's folder.
struct HostBudget {
  int64_t ram = 0;                 // bytes; <= 0: unknown (then RAM is not checked)
  std::string ram_source;          // MemAvailable, the memory cgroup's room, or the config's
                                   // launch.memory_limit_gb (file:line)
  std::vector<int64_t> disk_free;  // per FitEstimate::disks entry; < 0: unknown
};

// The inputs of the estimate for the job on `world` ranks (`catalog` loads a model plugin).
FitInputs fit_inputs(const JobSettings& job, PluginCatalog& catalog, int world);
// Bytes saved for backward by one micro batch of `micro_batch` samples, and the extra a backward
// step adds on top (see memory_fit.cc for how it is estimated and how it was checked); 0 for
// TorchScript and plugin models, whose activations zt cannot estimate.
int64_t activation_bytes(const models::ModelShape& shape, int64_t micro_batch, int64_t element_size,
                         bool checkpointing);
// The estimate: pure arithmetic over the inputs; `engine` only names the file tiers.
FitEstimate estimate_fit(const FitInputs& inputs, const EngineSettings& engine);
// Throws ConfigError when the host RAM or a file tier is short: one line per tier (every tier,
// the short ones marked), with the bytes needed, had, and the knobs with their file:line.
void check_fit(const FitEstimate& estimate, const HostBudget& budget, const JobSettings& job);

// Free bytes (statvfs f_bavail) of the file system holding `path`, or of its nearest existing
// ancestor (the tier creates the folder later); -1 when none can be read.
int64_t file_tier_free_bytes(const std::string& path);

// What the host has for `e`: launch.memory_limit_gb, else MemAvailable or the room under this
// process's memory cgroup limit, whichever is less (plus what the ranks of this host already use
// when `in_a_rank`: this process is one of them), and statvfs of each file tier's folder.
HostBudget host_budget(const JobSettings& job, const FitEstimate& e, bool in_a_rank);

// Who checks, and what it does with the estimate. The process that starts the ranks checks
// before any exists (ranks started together would see each other's first allocations in
// MemAvailable); a rank checks only when another launcher than zt's started it (torchrun,
// mpirun), and the job's first rank prints the estimate.
struct FitCheck {
  bool enforce = true;     // throw the refusal when the job does not fit
  bool print = false;      // print the one-line estimate ("memory fit: ...")
  bool in_a_rank = false;  // this process is, or is about to become, one of the job's ranks
};

// The check the trainer runs: estimate, budget (launch.memory_limit_gb or MemAvailable, plus
// what the ranks of this host already use when they are running; statvfs for each folder), then
// check_fit as `how` says; printed on the job's first rank, the run shows the estimate next to
// the peak RSS the summary measures.
void check_memory_fits(const JobSettings& job, PluginCatalog& catalog, int world,
                       const FitCheck& how);

// One line: host RAM per rank by category and in all, each file tier's bytes per rank, next to
// what the host has.
std::string describe_fit(const FitEstimate& estimate, const HostBudget& budget);

}  // namespace zt::trainer
