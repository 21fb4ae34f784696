// zt_bench_train's shared vocabulary: the plan (which trainer jobs, how many steps, how many
// repetitions), what one trainer job measured, and the rows of the result (a stage and shard
// strategy without offload, an offload configuration, the built-in GPT against the same GPT
// as TorchScript, or PyTorch DDP on the same GPT, aggregated over repetitions). main.cc plans,
// trainer_job.cc runs a job, metrics_file.cc reads what it wrote, report.cc aggregates and prints.
// Thread safety: plain values.
#pragma once

#include "common/bench_util.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "zt/bytes.h"  // kMiB

namespace zt::bench {

constexpr int kRanks = 2;

// The shard plugins compared, as the issue names them ("tensor", "bucket") and as the trainer
// loads them (plugins.shard).
struct Strategy {
  const char* name;
  const char* plugin;
};
constexpr Strategy kStrategies[] = {{"tensor", "shard_tensor"}, {"bucket", "shard_bucket"}};
constexpr int kStages[] = {0, 1, 2, 3};

// The offload configurations, each one more job per repetition after the 8 above: where the
// optimizer states with their fp32 master (plugins.offload_optimizer) and the stage-3 parameter
// shards (plugins.offload_param) live, as offload plugin ids ("" = compute memory). All use
// kOffloadStrategy; each is compared with the same stage and strategy without offload.
struct Offload {
  int stage;
  const char* optimizer;
  const char* param;
};
constexpr Offload kOffloads[] = {{3, "offload_cpu", ""},
                                 {3, "offload_nvme", ""},
                                 {3, "offload_nvme", "offload_cpu"},  // the headline composition
                                 {3, "offload_nvme", "offload_nvme"},
                                 {1, "offload_nvme", ""}};  // ZeRO-Offload style
constexpr Strategy kOffloadStrategy = kStrategies[1];
// Elements per streamed tile (zero.sub_group_size), as configs/zero3_offload.toml: 1 MiB per
// fp32 array, so a rank's ~5.4M-element shard streams in about 21 tiles.
constexpr int64_t kOffloadSubGroup = 262144;

// The TorchScript job, one more per repetition: the stage and strategy below with the bench's
// GPT loaded from a TorchScript file (model.kind = "torchscript") that
// tests/torchscript/torchscript_models.py writes to compute what the built-in GPT computes. Its
// tokens/s is compared with the same stage and strategy's built-in job.
constexpr int kTorchScriptStage = 3;
constexpr Strategy kTorchScriptStrategy = kStrategies[1];

// The peer: PyTorch's DistributedDataParallel (python3-torch 1.13, Gloo) training the same GPT
// from the same initial weights on the same samples with the same schedule, 1 intra-op thread per
// rank as the trainer gives 2 ranks on 2 cores (bench/train/ddp_gpt.py). Every zt job starts
// from those weights too (model.init_from), so each row's losses can be compared with DDP's.
// The target: zt's ZeRO-3 (kDdpTargetStrategy, configs/zero3.toml's) at least kMinStage3OverDdp
// times DDP's tokens/s.
constexpr Strategy kDdpTargetStrategy = kStrategies[1];
// The seed of the initial weights ddp_gpt.py writes (GPT-2's init).
constexpr int kInitSeed = 1234;
// The compute-precision jobs, two more per repetition: zt's stage 3 (kDdpTargetStrategy) with
// precision.compute = bf16 (fp32 master and moments) and DDP under torch.autocast(cpu, bf16)
// (fp32 weights and AdamW states, bf16 matmuls): each compared with both DDP jobs, and every
// job's model FLOP/s per rank with the machine's measured fp32 sgemm peak.

struct Plan {
  // Steps per trainer job. At about 0.6 s a step for the ~11M-parameter GPT on two cores, 14
  // steps plus ~2 s of start-up keep 8 jobs x 2 repetitions at about 3.5 minutes. (Measured on
  // an idle machine at 0.42 s a step: 8 jobs ~2 minutes, 13 jobs with offload 3.6 minutes.)
  int steps = 14;
  // Leading steps of each job left out of the medians: the first steps allocate buffers,
  // fault in pages and (stage 3) learn the gather order.
  int warmup = 3;
  // Passes over all (stage, strategy) jobs; the jobs of a pass are interleaved so that drift
  // of the shared machine hits every job alike.
  int reps = 2;
  // Run the kOffloads jobs too: 5 jobs of ~10 s per repetition, about 80% more time.
  bool offload = true;
  // Run the TorchScript job too (one of ~10 s per repetition) when `python` can write its file.
  bool torchscript = true;
  // Run the DDP job too (one per repetition), with every zt job starting from its weights.
  bool ddp = true;
  // Run the compute-precision jobs too (bf16 zt and DDP; the DDP one only with ddp).
  bool bf16 = true;
  // The GPT: "bench" (bench_gpt_overrides(), ~10.8M parameters) or "zero3" (configs/zero3.toml's
  // own, ~4.8M).
  std::string model = "bench";
  // The Python with torch that writes the TorchScript file and runs DDP: Debian's python3-torch,
  // which matches the LibTorch the trainer links; a python3 earlier on PATH (pyenv) may lack torch.
  std::string python = "/usr/bin/python3";
  std::string json_path = "bench-results/train.json";
  std::string trainer = "";  // the trainer executable; empty: the one built with the bench
  // Folder for offload_nvme's files (plugin.offload_nvme.path). main.cc sets it: the option, or
  // a folder in the scratch folder unless that is on tmpfs/ramfs (host memory, not a disk).
  std::string nvme_path = "";
};

// The GPT's sizes as the trainer resolved them (model.n_layer, ...), spelled as in the config:
// what the Python helpers are given to build the same GPT.
struct GptSizes {
  std::string n_layer, n_head, d_model, seq_len, vocab;
};

// One trainer job: one (stage, strategy, offload, model) in one repetition.
struct JobSpec {
  int stage = 0;
  Strategy strategy{};
  int rep = 0;
  const char* offload_optimizer = "";  // offload plugin id, "" for none
  const char* offload_param = "";
  std::string torchscript = "";  // the GPT's TorchScript file; "" for the built-in GPT
  bool ddp = false;              // PyTorch DDP instead of the trainer (stage and strategy unused)
  bool bf16 = false;             // bf16 compute (zt: precision.compute; DDP: autocast)
  bool offloaded() const { return *offload_optimizer || *offload_param; }
};

// Model-state bytes of one rank at a job's last step, by where they live (metrics.jsonl).
struct RankStates {
  int64_t compute = 0;            // params + grads + master + optimizer_states
  int64_t offload_optimizer = 0;  // master + optimizer states in the optimizer's tier
  int64_t offload_param = 0;      // stage-3 parameter shards in the parameters' tier
  int64_t offload_staging = 0;    // host buffers streaming the tiers (not model states)
  int64_t total() const { return compute + offload_optimizer + offload_param; }
};

// What one job measured, read from its metrics.jsonl and stdout.
struct JobResult {
  std::vector<double> step_time_s;   // per step after warm-up
  std::vector<double> tokens_per_s;  // per step after warm-up
  std::vector<double> losses;        // every step's loss (mean over ranks), warm-up included
  int64_t model_state_bytes = 0;     // max over ranks of params+grads+master+optimizer states
  RankStates busiest;                // the rank with the most model states in all tiers
  std::string offload_note;          // the trainer's "offload: ..." line, "" without offload
  int world = 0;                     // ranks in the job (entries of "memory")
  int64_t parameters = 0;            // psi, from the trainer's summary
  bool low_precision = false;        // compute dtype not fp32: theory counts a separate master
  double wall_s = 0;                 // the whole job, start-up included
  // The trainer's metrics (none for DDP): model FLOPs of a step (all ranks), and per step after
  // warm-up the FLOP/s per rank and the trainer's measured peak for the compute dtype.
  double flops_per_step = 0;
  std::vector<double> flops_per_s_per_rank;
  std::vector<double> peak_flops_per_rank;
};

// One (stage, strategy), over all repetitions.
struct Row {
  int stage = 0;
  std::string strategy;  // "tensor" or "bucket"
  int world = 0;
  int64_t parameters = 0;
  int samples = 0;          // steps behind the medians
  double tokens_per_s = 0;  // median over the samples
  double step_time_s = 0;   // median over the samples
  int64_t model_state_bytes = 0;
  int64_t theory_bytes = 0;    // trainer/setup/memory_theory.h
  double ratio_to_stage0 = 0;  // step time over stage 0's, same strategy (NaN without it)
  double vs_ddp = NAN;         // tokens/s over DDP's (NaN without the DDP row)
  double loss_vs_ddp = NAN;    // the largest |loss - DDP's loss| / DDP's loss over every step
  int loss_vs_ddp_step = 0;    // the step where it was largest
  double measured_over_theory() const {
    return theory_bytes > 0 ? static_cast<double>(model_state_bytes) / theory_bytes : 0;
  }
};

// One offload configuration over all repetitions; bytes of the busiest rank.
struct OffloadRow {
  Offload offload{};
  std::string strategy;
  int world = 0;
  int64_t parameters = 0;
  int samples = 0;
  double tokens_per_s = 0;
  double step_time_s = 0;
  double vs_no_offload = 0;  // step time over the same stage and strategy's without offload
  int64_t compute_bytes = 0;
  int64_t cpu_bytes = 0;      // in offload_cpu (host memory outside the engine's accounting)
  int64_t nvme_bytes = 0;     // in offload_nvme's files
  int64_t staging_bytes = 0;  // host buffers streaming the tiers, not counted in total
  int64_t theory_bytes = 0;   // trainer/setup/memory_theory.h for the stage
  bool low_precision = false;
  std::string note;  // the trainer's "offload: ..." line of the first repetition
  int64_t total_bytes() const { return compute_bytes + cpu_bytes + nvme_bytes; }
  double total_over_theory() const {
    return theory_bytes > 0 ? static_cast<double>(total_bytes()) / theory_bytes : 0;
  }
};

// The built-in GPT against the same GPT as TorchScript (kTorchScriptStage, kTorchScriptStrategy,
// no offload), over all repetitions.
struct TorchScriptRow {
  int world = 0;
  int64_t builtin_parameters = 0;
  int64_t torchscript_parameters = 0;  // equal to the built-in's when the file is the same GPT
  int builtin_samples = 0;
  int torchscript_samples = 0;
  double builtin_tokens_per_s = 0;  // medians over the samples
  double torchscript_tokens_per_s = 0;
  double ratio() const { return torchscript_tokens_per_s / builtin_tokens_per_s; }
};

// One row of the compute-precision table: zt's stage 3 (kDdpTargetStrategy) or DDP, in fp32 or
// bf16, over all repetitions.
struct PrecisionRow {
  std::string label;  // "PyTorch DDP", "zt stage 3 bucket"
  bool ddp = false;
  bool bf16 = false;
  int samples = 0;
  double tokens_per_s = 0;  // medians over the samples
  double step_time_s = 0;
  double flops_per_s_per_rank = 0;  // model FLOPs of a step (zt's count) per second per rank
  double of_sgemm_peak = 0;         // that over the measured fp32 sgemm peak per rank
  double vs_ddp_fp32 = NAN;         // tokens/s over DDP fp32's
  double vs_ddp_same = NAN;         // tokens/s over DDP's in the same precision
  double loss_off_ddp_same = NAN;   // largest |loss - DDP's| / DDP's, same precision, every step
};

// PyTorch DDP on the bench's GPT, over all repetitions.
struct DdpRow {
  int world = 0;
  int samples = 0;
  double tokens_per_s = 0;  // medians over the samples
  double step_time_s = 0;
};

}  // namespace zt::bench
