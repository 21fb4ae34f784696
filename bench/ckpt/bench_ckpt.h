// zt_bench_ckpt's vocabulary: the configurations measured (a model size, world, ZeRO stage and
// where the optimizer states live), the trainer jobs run for each (a synchronous save, an
// asynchronous one, a resume, and for offloaded states one without checkpoints), and what they
// measured. main.cc plans, ckpt_jobs.cc runs and reads a job, report.cc prints and writes JSON.
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::bench {

struct CkptConfig {
  std::string label;               // "bench GPT, stage 3", "1B GPT, NVMe"
  std::vector<std::string> model;  // --set overrides of configs/zero3.toml for the model
  int world = 2;
  int stage = 3;
  std::string offload_optimizer;  // "" or an offload plugin id
  std::string offload_param;
};

// Trainer jobs per configuration.
enum class JobKind { kSync, kAsync, kResume, kNoCheckpoint };
const char* job_name(JobKind kind);

// What one configuration measured (seconds are medians over the saves of a job).
struct CkptResult {
  CkptConfig config;
  int64_t model_params = 0;       // from the checkpoint's manifest
  int64_t bytes = 0;              // the whole checkpoint (every rank file and the manifest)
  int64_t rank_bytes = 0;         // one rank's share of the files
  double save_s = 0;              // synchronous save: how long the step stopped
  double stall_s = 0;             // asynchronous save: how long the step stopped
  double async_write_s = 0;       // asynchronous save: until rank 0's file was on disk
  double load_s = 0;              // resume: reading the checkpoint into the engine
  double disk_write_gbps = 0;     // dd oflag=direct on the same folder, same size, this run
  double memcpy_gbps = 0;         // one core copying memory, this run
  int64_t peak_rss_no_ckpt = 0;   // offloaded states only: rank 0's peak RSS without checkpoints
  int64_t peak_rss_async = 0;     // ... and with asynchronous saves
  int64_t tier_buffer_bytes = 0;  // offload_nvme's own buffer pool (buffer_count x buffer_mb)
  bool offloaded_to_files() const { return config.offload_optimizer == "offload_nvme"; }
  double save_gbps() const { return save_s > 0 ? bytes / save_s / 1e9 : 0; }
  // What an asynchronous save may cost the step: copying one rank's bytes once in memory.
  double memcpy_s() const { return memcpy_gbps > 0 ? rank_bytes / memcpy_gbps / 1e9 : 0; }
};

}  // namespace zt::bench
