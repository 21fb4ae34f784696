// zt_bench_train's report: rows aggregated from the jobs, the printed tables, the targets
// (evaluated and printed, never asserted: a miss is data, not a failure) and
// bench-results/train.json. Offload rows have no targets; how far their bytes are from theory is
// printed as information. The TorchScript comparison has its own target and table; the DDP
// comparison adds a table and two targets, the compute-precision table (zt's stage 3 and DDP in
// fp32 and bf16) three more.
// Thread safety: pure functions over rows, plus file output.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_train.h"

namespace zt::bench {

// The targets: stage-3 model-state bytes per rank within 5% of theory, and stage-3 step time at
// most 1.5x stage 0's, for each strategy.
constexpr double kMaxBytesOffTheory = 0.05;
constexpr double kMaxStage3OverStage0 = 1.5;
// Not a target: the offload table says which configurations keep their model states, summed
// over the tiers, within this of theory.
constexpr double kOffloadInfoOffTheory = 0.05;
// The GPT as TorchScript runs the same computation through the TorchScript interpreter; its
// tokens/s should stay within 10% of the built-in GPT's.
constexpr double kMinTorchScriptOverBuiltin = 0.90;
// zt's ZeRO-3 against PyTorch DDP on the same job: at least this times DDP's tokens/s. And every
// row's loss within this of DDP's at every step, relative: both train the same model on the same
// samples in fp32, so only the order of floating-point sums differs (measured: ~1e-7 for 20
// steps, 4e-5 after a loss spike magnified it).
constexpr double kMinStage3OverDdp = 1.3;
constexpr double kMaxLossOffDdp = 1e-4;
// The compute-precision table's targets: zt's stage 3 at least this times DDP's tokens/s in the
// same compute precision, and its fp32 model FLOP/s per rank at least this of the measured fp32
// sgemm peak per rank.
constexpr double kMinStage3OverDdpSamePrecision = 1.5;
constexpr double kMinStage3FlopsOfSgemmPeak = 0.70;

struct TargetCheck {
  std::string name;      // "stage3_bytes_vs_theory", "stage3_step_time_vs_stage0",
                         // "stage3_tokens_vs_ddp", "losses_vs_ddp",
                         // "stage3_flops_of_sgemm_peak" or "stage3_tokens_vs_ddp_same_precision"
  std::string strategy;  // "tensor" or "bucket"; the compute dtype for the precision checks
  double value = 0;      // measured/theory, or step-time ratio
  double threshold = 0;  // allowed |value - 1|, or the largest ratio
  bool pass = false;
};

// One row per (stage, strategy) in table order: medians over every repetition's post-warm-up
// steps, bytes as the largest any repetition measured, theory from trainer/setup/memory_theory.h.
// Jobs with offload or a TorchScript model are left out of these rows.
std::vector<Row> aggregate(const std::vector<std::pair<JobSpec, JobResult>>& jobs);
// With the DDP comparison filled in (compare_with_ddp), its targets too, and the compute-
// precision table's.
std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows,
                                          const std::vector<PrecisionRow>& precision);
// The compute-precision table: DDP fp32, DDP bf16, zt stage 3 fp32, zt stage 3 bf16 (those that
// ran), each over every repetition; empty when no bf16 job ran.
std::vector<PrecisionRow> aggregate_precision(
    const std::vector<std::pair<JobSpec, JobResult>>& jobs);

// The DDP jobs' medians; nullopt without DDP jobs.
std::optional<DdpRow> aggregate_ddp(const std::vector<std::pair<JobSpec, JobResult>>& jobs);
// Fills each row's vs_ddp and its largest loss difference from DDP's, over every repetition
// (each zt job against the DDP job of its repetition).
void compare_with_ddp(const std::vector<std::pair<JobSpec, JobResult>>& jobs, const DdpRow& ddp,
                      std::vector<Row>& rows);
// One row per kOffloads entry that has jobs, in that order: medians as aggregate(), bytes of the
// busiest rank of the repetition that measured the most in all tiers, step time over `rows`'
// same stage and strategy (NaN without it). The tier of each role comes from the job's config.
std::vector<OffloadRow> aggregate_offload(const std::vector<std::pair<JobSpec, JobResult>>& jobs,
                                          const std::vector<Row>& rows);

// The TorchScript jobs' medians against `rows`' row of the same stage and strategy; nullopt
// without TorchScript jobs or without that row.
std::optional<TorchScriptRow> aggregate_torchscript(
    const std::vector<std::pair<JobSpec, JobResult>>& jobs, const std::vector<Row>& rows);

void print_table(std::FILE* out, const std::vector<Row>& rows, const Plan& plan);
void print_targets(std::FILE* out, const std::vector<TargetCheck>& checks);
// The offload table, its notes (the headline composition's tiers as the trainer described them,
// and any tier that fell back to buffered I/O) and the informational line on bytes against
// theory. `rows` give the step times the ratios are over.
void print_offload_table(std::FILE* out, const std::vector<OffloadRow>& offload,
                         const std::vector<Row>& rows);
// DDP's tokens/s, then each row's tokens/s over DDP's and its largest loss difference.
void print_ddp_table(std::FILE* out, const std::vector<Row>& rows, const DdpRow& ddp);
// The compute-precision rows: tokens/s, FLOP/s per rank against the sgemm peak, ratios to DDP.
void print_precision_table(std::FILE* out, const std::vector<PrecisionRow>& rows);
// The built-in and TorchScript tokens/s, their ratio and the target.
void print_torchscript_table(std::FILE* out, const TorchScriptRow& ts);
// Creates the file's folder if missing. Throws IoError when it cannot write.
void write_json(const std::string& path, const std::vector<Row>& rows,
                const std::vector<TargetCheck>& checks, const std::vector<OffloadRow>& offload,
                const std::optional<TorchScriptRow>& torchscript, const std::optional<DdpRow>& ddp,
                const std::vector<PrecisionRow>& precision, const Plan& plan, double total_seconds);

}  // namespace zt::bench
