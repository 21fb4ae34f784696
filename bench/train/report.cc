// zt_bench_train's report: aggregation, table, targets and train.json.
#include "report.h"
#include "common/bench_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "trainer/setup/memory_theory.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

// Whether `spec` is a job of the first table's row (stage, strategy): fp32, no offload, the
// built-in GPT, not DDP.
bool in_row(const JobSpec& spec, int stage, const std::string& strategy) {
  return !spec.ddp && !spec.bf16 && !spec.offloaded() && spec.torchscript.empty() &&
         spec.stage == stage && spec.strategy.name == strategy;
}

const Row* find(const std::vector<Row>& rows, int stage, const std::string& strategy) {
  for (const Row& r : rows) {
    if (r.stage == stage && r.strategy == strategy) return &r;
  }
  return nullptr;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / kMiB; }

// "cpu" for offload_cpu, "-" for compute memory: the short names of the offload table.
std::string tier_name(const char* plugin) {
  const std::string id = plugin;
  if (id.empty()) return "-";
  return id.rfind("offload_", 0) == 0 ? id.substr(8) : id;
}

// "s3 opt:nvme par:cpu"
std::string offload_label(const Offload& o) {
  std::string label = "s" + std::to_string(o.stage) + " opt:" + tier_name(o.optimizer);
  if (*o.param) label += " par:" + tier_name(o.param);
  return label;
}

bool same_offload(const JobSpec& spec, const Offload& o) {
  return !spec.ddp && !spec.bf16 && spec.torchscript.empty() && spec.stage == o.stage &&
         std::strcmp(spec.offload_optimizer, o.optimizer) == 0 &&
         std::strcmp(spec.offload_param, o.param) == 0;
}

// Bytes of `s` in the tier `plugin`: each role's bytes are in the tier its job configured, and
// one tier may hold both.
int64_t bytes_in(const RankStates& s, const Offload& o, const char* plugin) {
  return (std::strcmp(o.optimizer, plugin) == 0 ? s.offload_optimizer : 0) +
         (std::strcmp(o.param, plugin) == 0 ? s.offload_param : 0);
}

std::string row_json(const Row& r) {
  const std::string vs_ddp = std::isnan(r.vs_ddp)
                                 ? std::string()
                                 : ", \"tokens_per_s_over_ddp\": " + json_number(r.vs_ddp) +
                                       ", \"max_loss_off_ddp\": " + json_number(r.loss_vs_ddp) +
                                       ", \"max_loss_off_ddp_step\": " +
                                       std::to_string(r.loss_vs_ddp_step);
  return "{\"stage\": " + std::to_string(r.stage) + ", \"strategy\": \"" + r.strategy +
         "\", \"offload\": \"none\", \"world\": " + std::to_string(r.world) +
         ", \"tokens_per_s\": " + json_number(r.tokens_per_s) +
         ", \"model_state_bytes_per_rank\": " + std::to_string(r.model_state_bytes) +
         ", \"theory_bytes_per_rank\": " + std::to_string(r.theory_bytes) +
         ", \"step_time_s\": " + json_number(r.step_time_s) +
         ", \"ratio_to_stage0\": " + json_number(r.ratio_to_stage0) +
         ", \"measured_over_theory\": " + json_number(r.measured_over_theory()) +
         ", \"parameters\": " + std::to_string(r.parameters) +
         ", \"samples\": " + std::to_string(r.samples) + vs_ddp + "}";
}

std::string ddp_json(const DdpRow& d) {
  return "{\"world\": " + std::to_string(d.world) +
         ", \"tokens_per_s\": " + json_number(d.tokens_per_s) +
         ", \"step_time_s\": " + json_number(d.step_time_s) +
         ", \"samples\": " + std::to_string(d.samples) + "}";
}

// The largest |a - b| / |b| over the steps both have, and its 1-based step.
std::pair<double, int> largest_loss_difference(const std::vector<double>& a,
                                               const std::vector<double>& b) {
  std::pair<double, int> worst{0, 0};
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double off = std::abs(a[i] - b[i]) / std::abs(b[i]);
    // A NaN loss on either side is the largest difference there is.
    if (!(off <= worst.first)) worst = {std::isnan(off) ? INFINITY : off, static_cast<int>(i + 1)};
  }
  return worst;
}

std::string offload_json(const OffloadRow& r) {
  auto tier = [](const char* plugin) { return json_string(*plugin ? plugin : "none"); };
  return "{\"stage\": " + std::to_string(r.offload.stage) + ", \"strategy\": \"" + r.strategy +
         "\", \"offload_optimizer\": " + tier(r.offload.optimizer) +
         ", \"offload_param\": " + tier(r.offload.param) +
         ", \"tokens_per_s\": " + json_number(r.tokens_per_s) +
         ", \"step_s\": " + json_number(r.step_time_s) +
         ", \"vs_no_offload\": " + json_number(r.vs_no_offload) +
         ", \"compute_mib\": " + json_number(mib(r.compute_bytes)) +
         ", \"offload_cpu_mib\": " + json_number(mib(r.cpu_bytes)) +
         ", \"offload_nvme_mib\": " + json_number(mib(r.nvme_bytes)) +
         ", \"total_mib\": " + json_number(mib(r.total_bytes())) +
         ", \"theory_mib\": " + json_number(mib(r.theory_bytes)) +
         ", \"total_over_theory\": " + json_number(r.total_over_theory()) +
         ", \"staging_mib\": " + json_number(mib(r.staging_bytes)) +
         ", \"samples\": " + std::to_string(r.samples) + "}";
}

std::string torchscript_json(const TorchScriptRow& t) {
  return "{\"stage\": " + std::to_string(kTorchScriptStage) + ", \"strategy\": \"" +
         kTorchScriptStrategy.name + "\", \"world\": " + std::to_string(t.world) +
         ", \"builtin_tokens_per_s\": " + json_number(t.builtin_tokens_per_s) +
         ", \"torchscript_tokens_per_s\": " + json_number(t.torchscript_tokens_per_s) +
         ", \"ratio\": " + json_number(t.ratio()) +
         ", \"target\": " + json_number(kMinTorchScriptOverBuiltin) +
         ", \"met\": " + (t.ratio() >= kMinTorchScriptOverBuiltin ? "true" : "false") +
         ", \"builtin_parameters\": " + std::to_string(t.builtin_parameters) +
         ", \"torchscript_parameters\": " + std::to_string(t.torchscript_parameters) +
         ", \"samples\": {\"builtin\": " + std::to_string(t.builtin_samples) +
         ", \"torchscript\": " + std::to_string(t.torchscript_samples) + "}}";
}

std::string precision_json(const PrecisionRow& p) {
  auto number_or_null = [](double v) {
    return std::isnan(v) ? std::string("null") : json_number(v);
  };
  return "{\"job\": " + json_string(p.ddp ? "ddp" : "zt_stage3") +
         ", \"strategy\": " + json_string(p.ddp ? "" : kDdpTargetStrategy.name) +
         ", \"compute\": " + json_string(p.bf16 ? "bf16" : "fp32") +
         ", \"tokens_per_s\": " + json_number(p.tokens_per_s) +
         ", \"step_time_s\": " + json_number(p.step_time_s) +
         ", \"flops_per_s_per_rank\": " + json_number(p.flops_per_s_per_rank) +
         ", \"of_sgemm_peak\": " + json_number(p.of_sgemm_peak) +
         ", \"tokens_per_s_over_ddp_fp32\": " + number_or_null(p.vs_ddp_fp32) +
         ", \"tokens_per_s_over_ddp_same_precision\": " + number_or_null(p.vs_ddp_same) +
         ", \"max_loss_off_ddp_same_precision\": " + number_or_null(p.loss_off_ddp_same) +
         ", \"samples\": " + std::to_string(p.samples) + "}";
}

std::string check_json(const TargetCheck& c) {
  return "{\"name\": \"" + c.name + "\", \"strategy\": \"" + c.strategy +
         "\", \"value\": " + json_number(c.value) + ", \"threshold\": " + json_number(c.threshold) +
         ", \"pass\": " + (c.pass ? "true" : "false") + "}";
}

}  // namespace

std::vector<Row> aggregate(const std::vector<std::pair<JobSpec, JobResult>>& jobs) {
  std::vector<Row> rows;
  for (const Strategy& strategy : kStrategies) {
    for (int stage : kStages) {
      Row row;
      row.stage = stage;
      row.strategy = strategy.name;
      std::vector<double> times, tokens;
      bool low = false;
      for (const auto& [spec, result] : jobs) {
        if (!in_row(spec, stage, row.strategy)) continue;
        times.insert(times.end(), result.step_time_s.begin(), result.step_time_s.end());
        tokens.insert(tokens.end(), result.tokens_per_s.begin(), result.tokens_per_s.end());
        row.model_state_bytes = std::max(row.model_state_bytes, result.model_state_bytes);
        row.world = result.world;
        row.parameters = result.parameters;
        low = result.low_precision;
      }
      if (times.empty()) continue;
      row.samples = static_cast<int>(times.size());
      row.step_time_s = median(times);
      row.tokens_per_s = median(tokens);
      row.theory_bytes = trainer::theory_model_state_bytes(stage, row.parameters, row.world,
                                                           trainer::TheoryDtypes{low});
      rows.push_back(row);
    }
  }
  for (Row& r : rows) {
    const Row* base = find(rows, 0, r.strategy);
    r.ratio_to_stage0 = base ? r.step_time_s / base->step_time_s : NAN;
  }
  return rows;
}

std::vector<OffloadRow> aggregate_offload(const std::vector<std::pair<JobSpec, JobResult>>& jobs,
                                          const std::vector<Row>& rows) {
  std::vector<OffloadRow> out;
  for (const Offload& o : kOffloads) {
    OffloadRow row;
    row.offload = o;
    std::vector<double> times, tokens;
    const JobResult* most = nullptr;
    bool low = false;
    for (const auto& [spec, result] : jobs) {
      if (!same_offload(spec, o)) continue;
      if (row.strategy.empty()) row.note = result.offload_note;
      row.strategy = spec.strategy.name;
      times.insert(times.end(), result.step_time_s.begin(), result.step_time_s.end());
      tokens.insert(tokens.end(), result.tokens_per_s.begin(), result.tokens_per_s.end());
      if (!most || result.busiest.total() > most->busiest.total()) most = &result;
      row.world = result.world;
      row.parameters = result.parameters;
      low = result.low_precision;
    }
    if (!most) continue;
    row.samples = static_cast<int>(times.size());
    row.step_time_s = median(times);
    row.tokens_per_s = median(tokens);
    row.compute_bytes = most->busiest.compute;
    row.cpu_bytes = bytes_in(most->busiest, o, "offload_cpu");
    row.nvme_bytes = bytes_in(most->busiest, o, "offload_nvme");
    row.staging_bytes = most->busiest.offload_staging;
    // Every offload config here offloads all of its optimizer states (and parameter shards), so
    // the fp32 master is its own copy for all parameters.
    row.theory_bytes = trainer::theory_model_state_bytes(o.stage, row.parameters, row.world,
                                                         trainer::TheoryDtypes{low}, 1.0);
    row.low_precision = low;
    const Row* base = find(rows, o.stage, row.strategy);
    row.vs_no_offload = base ? row.step_time_s / base->step_time_s : NAN;
    out.push_back(row);
  }
  return out;
}

std::optional<TorchScriptRow> aggregate_torchscript(
    const std::vector<std::pair<JobSpec, JobResult>>& jobs, const std::vector<Row>& rows) {
  const Row* base = find(rows, kTorchScriptStage, kTorchScriptStrategy.name);
  if (!base) return std::nullopt;
  TorchScriptRow t;
  std::vector<double> tokens;
  for (const auto& [spec, result] : jobs) {
    if (spec.torchscript.empty()) continue;
    tokens.insert(tokens.end(), result.tokens_per_s.begin(), result.tokens_per_s.end());
    t.world = result.world;
    t.torchscript_parameters = result.parameters;
  }
  if (tokens.empty()) return std::nullopt;
  t.torchscript_samples = static_cast<int>(tokens.size());
  t.torchscript_tokens_per_s = median(tokens);
  t.builtin_samples = base->samples;
  t.builtin_tokens_per_s = base->tokens_per_s;
  t.builtin_parameters = base->parameters;
  return t;
}

std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows,
                                          const std::vector<PrecisionRow>& precision) {
  std::vector<TargetCheck> checks;
  for (const Strategy& strategy : kStrategies) {
    const Row* r = find(rows, 3, strategy.name);
    if (!r) continue;
    const double off = r->measured_over_theory();
    checks.push_back({"stage3_bytes_vs_theory", strategy.name, off, kMaxBytesOffTheory,
                      std::abs(off - 1) <= kMaxBytesOffTheory});
    checks.push_back({"stage3_step_time_vs_stage0", strategy.name, r->ratio_to_stage0,
                      kMaxStage3OverStage0, r->ratio_to_stage0 <= kMaxStage3OverStage0});
  }
  const Row* r = find(rows, 3, kDdpTargetStrategy.name);
  if (r && !std::isnan(r->vs_ddp)) {
    checks.push_back({"stage3_tokens_vs_ddp", r->strategy, r->vs_ddp, kMinStage3OverDdp,
                      r->vs_ddp >= kMinStage3OverDdp});
    double worst = 0;
    for (const Row& row : rows) worst = std::max(worst, row.loss_vs_ddp);
    checks.push_back({"losses_vs_ddp", "all", worst, kMaxLossOffDdp, worst <= kMaxLossOffDdp});
  }
  for (const PrecisionRow& p : precision) {
    if (p.ddp) continue;
    const std::string dtype = p.bf16 ? "bf16" : "fp32";
    if (!p.bf16 && p.of_sgemm_peak > 0) {
      checks.push_back({"stage3_flops_of_sgemm_peak", dtype, p.of_sgemm_peak,
                        kMinStage3FlopsOfSgemmPeak, p.of_sgemm_peak >= kMinStage3FlopsOfSgemmPeak});
    }
    if (!std::isnan(p.vs_ddp_same)) {
      checks.push_back({"stage3_tokens_vs_ddp_same_precision", dtype, p.vs_ddp_same,
                        kMinStage3OverDdpSamePrecision,
                        p.vs_ddp_same >= kMinStage3OverDdpSamePrecision});
    }
  }
  return checks;
}

std::vector<PrecisionRow> aggregate_precision(
    const std::vector<std::pair<JobSpec, JobResult>>& jobs) {
  // zt's jobs of the table: stage 3, the DDP target's strategy, no offload, the built-in GPT.
  auto in_table = [](const JobSpec& spec) {
    return spec.ddp || (spec.stage == 3 && !spec.offloaded() && spec.torchscript.empty() &&
                        std::string(spec.strategy.plugin) == kDdpTargetStrategy.plugin);
  };
  bool any_bf16 = false;
  double flops_per_step = 0;
  std::vector<double> sgemm_peaks;
  for (const auto& [spec, result] : jobs) {
    any_bf16 = any_bf16 || spec.bf16;
    if (spec.ddp || !in_table(spec)) continue;
    if (result.flops_per_step > 0) flops_per_step = result.flops_per_step;
    if (!spec.bf16) {
      sgemm_peaks.insert(sgemm_peaks.end(), result.peak_flops_per_rank.begin(),
                         result.peak_flops_per_rank.end());
    }
  }
  if (!any_bf16) return {};
  const double sgemm_peak = sgemm_peaks.empty() ? 0 : median(sgemm_peaks);
  std::vector<PrecisionRow> out;
  for (bool ddp : {true, false}) {
    for (bool bf16 : {false, true}) {
      PrecisionRow row;
      row.ddp = ddp;
      row.bf16 = bf16;
      row.label = ddp ? "PyTorch DDP" : std::string("zt stage 3 ") + kDdpTargetStrategy.name;
      std::vector<double> times, tokens;
      int world = kRanks;
      for (const auto& [spec, result] : jobs) {
        if (!in_table(spec) || spec.ddp != ddp || spec.bf16 != bf16) continue;
        times.insert(times.end(), result.step_time_s.begin(), result.step_time_s.end());
        tokens.insert(tokens.end(), result.tokens_per_s.begin(), result.tokens_per_s.end());
        if (result.world > 0) world = result.world;
        // Each zt job against the DDP job of its repetition in the same precision.
        for (const auto& [peer, peer_result] : jobs) {
          if (ddp || !peer.ddp || peer.bf16 != bf16 || peer.rep != spec.rep) continue;
          const double off = largest_loss_difference(result.losses, peer_result.losses).first;
          if (std::isnan(row.loss_off_ddp_same) || !(off <= row.loss_off_ddp_same)) {
            row.loss_off_ddp_same = off;
          }
        }
      }
      if (times.empty()) continue;
      row.samples = static_cast<int>(times.size());
      row.step_time_s = median(times);
      row.tokens_per_s = median(tokens);
      // DDP runs the same GPT on the same batch, so a step is the same model FLOPs.
      row.flops_per_s_per_rank = flops_per_step / row.step_time_s / world;
      row.of_sgemm_peak = sgemm_peak > 0 ? row.flops_per_s_per_rank / sgemm_peak : 0;
      out.push_back(row);
    }
  }
  for (PrecisionRow& row : out) {
    for (const PrecisionRow& peer : out) {
      if (!peer.ddp) continue;
      if (!peer.bf16) row.vs_ddp_fp32 = row.tokens_per_s / peer.tokens_per_s;
      if (peer.bf16 == row.bf16 && !row.ddp) row.vs_ddp_same = row.tokens_per_s / peer.tokens_per_s;
    }
  }
  return out;
}

std::optional<DdpRow> aggregate_ddp(const std::vector<std::pair<JobSpec, JobResult>>& jobs) {
  DdpRow d;
  std::vector<double> times, tokens;
  for (const auto& [spec, result] : jobs) {
    if (!spec.ddp || spec.bf16) continue;
    times.insert(times.end(), result.step_time_s.begin(), result.step_time_s.end());
    tokens.insert(tokens.end(), result.tokens_per_s.begin(), result.tokens_per_s.end());
    d.world = result.world;
  }
  if (times.empty()) return std::nullopt;
  d.samples = static_cast<int>(times.size());
  d.step_time_s = median(times);
  d.tokens_per_s = median(tokens);
  return d;
}

void compare_with_ddp(const std::vector<std::pair<JobSpec, JobResult>>& jobs, const DdpRow& ddp,
                      std::vector<Row>& rows) {
  for (Row& row : rows) {
    row.vs_ddp = row.tokens_per_s / ddp.tokens_per_s;
    row.loss_vs_ddp = 0;
    for (const auto& [spec, result] : jobs) {
      if (!in_row(spec, row.stage, row.strategy)) continue;
      for (const auto& [peer, peer_result] : jobs) {
        if (!peer.ddp || peer.bf16 || peer.rep != spec.rep) continue;
        const auto [off, step] = largest_loss_difference(result.losses, peer_result.losses);
        if (!(off <= row.loss_vs_ddp)) {
          row.loss_vs_ddp = off;
          row.loss_vs_ddp_step = step;
        }
      }
    }
  }
}

void print_table(std::FILE* out, const std::vector<Row>& rows, const Plan& plan) {
  std::fprintf(out, "%-5s %-8s %10s %10s %10s %14s %12s %10s\n", "stage", "strategy", "tokens/s",
               "step (s)", "vs stage0", "states MiB/rk", "theory MiB", "meas/theo");
  std::string last;
  for (const Row& r : rows) {
    if (!last.empty() && r.strategy != last) std::fprintf(out, "\n");
    last = r.strategy;
    std::fprintf(out, "%-5d %-8s %10.0f %10.3f %9.2fx %14.1f %12.1f %10.3f\n", r.stage,
                 r.strategy.c_str(), r.tokens_per_s, r.step_time_s, r.ratio_to_stage0,
                 mib(r.model_state_bytes), mib(r.theory_bytes), r.measured_over_theory());
  }
  const int samples = rows.empty() ? 0 : rows.front().samples;
  std::fprintf(out,
               "medians over %d steps per row (%d repetition(s) x %d steps, the first %d of each "
               "left out); states: params + grads + master + optimizer states of the busiest rank "
               "at the last step; vs stage0: step time over stage 0's, same strategy\n",
               samples, plan.reps, plan.steps, plan.warmup);
}

void print_targets(std::FILE* out, const std::vector<TargetCheck>& checks) {
  std::fprintf(out, "\ntargets (reported, not asserted):\n");
  int passed = 0;
  for (const TargetCheck& c : checks) {
    passed += c.pass;
    if (c.name == "stage3_bytes_vs_theory") {
      std::fprintf(out,
                   "  %-4s %-6s stage-3 model-state bytes per rank within %.0f%% of theory: "
                   "%.3f\n",
                   c.pass ? "PASS" : "MISS", c.strategy.c_str(), c.threshold * 100, c.value);
    } else if (c.name == "stage3_step_time_vs_stage0") {
      std::fprintf(out,
                   "  %-4s %-6s stage-3 step time <= %.1fx stage 0's:                     "
                   "%.2fx\n",
                   c.pass ? "PASS" : "MISS", c.strategy.c_str(), c.threshold, c.value);
    } else if (c.name == "stage3_flops_of_sgemm_peak") {
      std::fprintf(out,
                   "  %-4s %-6s stage-3 model FLOP/s per rank >= %.0f%% of the sgemm peak:  "
                   "%.1f%%\n",
                   c.pass ? "PASS" : "MISS", c.strategy.c_str(), c.threshold * 100, c.value * 100);
    } else if (c.name == "stage3_tokens_vs_ddp_same_precision") {
      std::fprintf(out,
                   "  %-4s %-6s stage-3 tokens/s >= %.1fx DDP's in the same precision:    "
                   "%.2fx\n",
                   c.pass ? "PASS" : "MISS", c.strategy.c_str(), c.threshold, c.value);
    } else if (c.name == "stage3_tokens_vs_ddp") {
      std::fprintf(out,
                   "  %-4s %-6s stage-3 tokens/s >= %.1fx PyTorch DDP's:                  "
                   "%.2fx\n",
                   c.pass ? "PASS" : "MISS", c.strategy.c_str(), c.threshold, c.value);
    } else {
      std::fprintf(out,
                   "  %-4s %-6s every row's loss within %.0e of DDP's at every step:    "
                   "%.1e\n",
                   c.pass ? "PASS" : "MISS", c.strategy.c_str(), c.threshold, c.value);
    }
  }
  std::fprintf(out, "targets met: %d of %zu\n", passed, checks.size());
}

void print_offload_table(std::FILE* out, const std::vector<OffloadRow>& offload,
                         const std::vector<Row>& rows) {
  if (offload.empty()) return;
  std::fprintf(out, "%-20s %10s %10s %10s %14s %11s %11s %12s %11s %10s\n", "config", "tokens/s",
               "step (s)", "vs no-off", "compute MiB/rk", "cpu MiB/rk", "nvme MiB/rk",
               "total MiB/rk", "theory MiB", "total/theo");
  for (const OffloadRow& r : offload) {
    std::fprintf(out, "%-20s %10.0f %10.3f %9.2fx %14.1f %11.1f %11.1f %12.1f %11.1f %10.3f\n",
                 offload_label(r.offload).c_str(), r.tokens_per_s, r.step_time_s, r.vs_no_offload,
                 mib(r.compute_bytes), mib(r.cpu_bytes), mib(r.nvme_bytes), mib(r.total_bytes()),
                 mib(r.theory_bytes), r.total_over_theory());
  }
  std::string bases;
  std::vector<int> stages;
  for (const OffloadRow& r : offload) {
    if (std::find(stages.begin(), stages.end(), r.offload.stage) != stages.end()) continue;
    stages.push_back(r.offload.stage);
    const Row* base = find(rows, r.offload.stage, r.strategy);
    if (!base) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%sstage %d %.3f s", bases.empty() ? "" : ", ", r.offload.stage,
                  base->step_time_s);
    bases += buf;
  }
  int64_t staging = 0;
  for (const OffloadRow& r : offload) staging = std::max(staging, r.staging_bytes);
  std::fprintf(out,
               "medians over %d steps per row; opt: fp32 master + optimizer states, par: stage-3 "
               "parameter shards, each in offload_<tier>; vs no-off: step time over the same "
               "stage's without offload (%s)\n",
               offload.front().samples, bases.c_str());
  std::fprintf(
      out,
      "MiB/rk: the rank with the most model states at the last step; compute: params + "
      "grads + master + optimizer states in compute memory; cpu, nvme: model states in "
      "that tier; total: all three (the engine's buffers streaming the tiers, at most "
      "%.1f MiB, are not model states); theory: trainer/setup/memory_theory.h for the row's "
      "stage\n",
      mib(staging));
  for (const OffloadRow& r : offload) {
    if (r.note.find("buffered") != std::string::npos) {
      std::fprintf(out, "note: %s used buffered I/O, not O_DIRECT: %s\n",
                   offload_label(r.offload).c_str(), r.note.c_str());
    }
  }
  for (const OffloadRow& r : offload) {
    if (std::strcmp(r.offload.optimizer, "offload_nvme") == 0 &&
        std::strcmp(r.offload.param, "offload_cpu") == 0 && !r.note.empty()) {
      std::fprintf(out, "%s (rep 1): %s\n", offload_label(r.offload).c_str(), r.note.c_str());
    }
  }
  int within = 0;
  std::string outside;
  for (const OffloadRow& r : offload) {
    if (std::abs(r.total_over_theory() - 1) <= kOffloadInfoOffTheory) {
      ++within;
      continue;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.3f", outside.empty() ? "" : ", ",
                  offload_label(r.offload).c_str(), r.total_over_theory());
    outside += buf;
  }
  std::fprintf(out,
               "\ninfo (not a target): total model-state bytes per rank within %.0f%% of "
               "theory for %d of %zu offload configs%s%s%s\n",
               kOffloadInfoOffTheory * 100, within, offload.size(),
               outside.empty() ? "" : " (outside: ", outside.c_str(), outside.empty() ? "" : ")");
}

void print_ddp_table(std::FILE* out, const std::vector<Row>& rows, const DdpRow& ddp) {
  std::fprintf(out, "%-5s %-8s %10s %10s %10s %18s\n", "stage", "strategy", "tokens/s", "step (s)",
               "vs DDP", "max loss off DDP");
  std::fprintf(out, "%-14s %10.0f %10.3f %10s %18s\n", "PyTorch DDP", ddp.tokens_per_s,
               ddp.step_time_s, "1.00x", "-");
  for (const Row& r : rows) {
    std::fprintf(out, "%-5d %-8s %10.0f %10.3f %9.2fx %10.1e step %2d\n", r.stage,
                 r.strategy.c_str(), r.tokens_per_s, r.step_time_s, r.vs_ddp, r.loss_vs_ddp,
                 r.loss_vs_ddp_step);
  }
  std::fprintf(out,
               "vs DDP: tokens/s over DDP's (medians over %d DDP steps); max loss off DDP: the "
               "largest |loss - DDP's| / DDP's over every step of every repetition\n",
               ddp.samples);
}

void print_precision_table(std::FILE* out, const std::vector<PrecisionRow>& rows) {
  std::fprintf(out, "%-20s %-5s %10s %10s %14s %10s %12s %12s %16s\n", "job", "dtype", "tokens/s",
               "step (s)", "GFLOP/s per rk", "of sgemm", "vs DDP fp32", "vs DDP same",
               "loss off DDP same");
  for (const PrecisionRow& r : rows) {
    char same[32] = "-", loss[32] = "-";
    if (!std::isnan(r.vs_ddp_same)) std::snprintf(same, sizeof same, "%.2fx", r.vs_ddp_same);
    if (!std::isnan(r.loss_off_ddp_same)) {
      std::snprintf(loss, sizeof loss, "%.1e", r.loss_off_ddp_same);
    }
    std::fprintf(out, "%-20s %-5s %10.0f %10.3f %14.1f %9.1f%% %11.2fx %12s %16s\n",
                 r.label.c_str(), r.bf16 ? "bf16" : "fp32", r.tokens_per_s, r.step_time_s,
                 r.flops_per_s_per_rank / 1e9, r.of_sgemm_peak * 100, r.vs_ddp_fp32, same, loss);
  }
  std::fprintf(out,
               "medians over %d steps per row; bf16: zt's precision.compute = bf16 (bf16 "
               "parameters, activations and gradients; fp32 master and moments), DDP's "
               "torch.autocast(cpu, bf16) (fp32 weights and AdamW states, bf16 matmuls); "
               "GFLOP/s per rk: the trainer's model FLOPs of a step (both sides run the same "
               "GPT on the same batch) per second per rank; of sgemm: over the fp32 sgemm peak "
               "per rank the trainer measured (1 thread per rank, both ranks at once); loss off "
               "DDP same: the largest |loss - DDP's| / DDP's over every step, DDP in the same "
               "precision\n",
               rows.empty() ? 0 : rows.front().samples);
}

void print_torchscript_table(std::FILE* out, const TorchScriptRow& t) {
  std::fprintf(out, "%-12s %12s %10s %8s\n", "model", "parameters", "tokens/s", "steps");
  std::fprintf(out, "%-12s %12lld %10.0f %8d\n", "built-in",
               static_cast<long long>(t.builtin_parameters), t.builtin_tokens_per_s,
               t.builtin_samples);
  std::fprintf(out, "%-12s %12lld %10.0f %8d\n", "torchscript",
               static_cast<long long>(t.torchscript_parameters), t.torchscript_tokens_per_s,
               t.torchscript_samples);
  std::fprintf(out,
               "tokens/s: median over the steps after warm-up of every repetition; the built-in "
               "row is the stage %d %s row of the first table\n",
               kTorchScriptStage, kTorchScriptStrategy.name);
  if (t.torchscript_parameters != t.builtin_parameters) {
    // A different parameter count means the file is not the built-in GPT: the ratio compares
    // two models, not two ways of running one.
    std::fprintf(out, "warning: the TorchScript GPT has %lld parameters, the built-in %lld\n",
                 static_cast<long long>(t.torchscript_parameters),
                 static_cast<long long>(t.builtin_parameters));
  }
  const bool met = t.ratio() >= kMinTorchScriptOverBuiltin;
  std::fprintf(out, "\ntarget (reported, not asserted):\n");
  std::fprintf(out, "  %-4s TorchScript tokens/s >= %.2fx the built-in GPT's: %.3fx\n",
               met ? "PASS" : "MISS", kMinTorchScriptOverBuiltin, t.ratio());
}

void write_json(const std::string& path, const std::vector<Row>& rows,
                const std::vector<TargetCheck>& checks, const std::vector<OffloadRow>& offload,
                const std::optional<TorchScriptRow>& torchscript, const std::optional<DdpRow>& ddp,
                const std::vector<PrecisionRow>& precision, const Plan& plan,
                double total_seconds) {
  ResultsFile out(path);

  out << "{\n  \"bench\": \"train\",\n  " << blas_json() << ",\n  \"model\": \"" << plan.model
      << "\",\n  \"steps\": " << plan.steps << ",\n  \"warmup\": " << plan.warmup
      << ",\n  \"reps\": " << plan.reps << ",\n  \"total_seconds\": " << json_number(total_seconds)
      << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) out << (i ? ",\n    " : "\n    ") << row_json(rows[i]);
  const bool all_pass = std::all_of(checks.begin(), checks.end(), [](auto& c) { return c.pass; });
  out << "\n  ],\n  \"targets\": {\n    \"stage3_bytes_max_off_theory\": "
      << json_number(kMaxBytesOffTheory)
      << ",\n    \"stage3_step_time_over_stage0_max\": " << json_number(kMaxStage3OverStage0)
      << ",\n    \"stage3_tokens_over_ddp_min\": " << json_number(kMinStage3OverDdp)
      << ",\n    \"loss_off_ddp_max\": " << json_number(kMaxLossOffDdp)
      << ",\n    \"stage3_flops_of_sgemm_peak_min\": " << json_number(kMinStage3FlopsOfSgemmPeak)
      << ",\n    \"stage3_tokens_over_ddp_same_precision_min\": "
      << json_number(kMinStage3OverDdpSamePrecision)
      << ",\n    \"all_pass\": " << (all_pass ? "true" : "false") << ",\n    \"checks\": [";
  for (size_t i = 0; i < checks.size(); ++i) {
    out << (i ? ",\n      " : "\n      ") << check_json(checks[i]);
  }
  out << "\n    ]\n  },\n  \"offload_rows\": [";
  for (size_t i = 0; i < offload.size(); ++i) {
    out << (i ? ",\n    " : "\n    ") << offload_json(offload[i]);
  }
  out << (offload.empty() ? "]" : "\n  ]");
  // null when the TorchScript job did not run (--torchscript off, or no Python with torch).
  out << ",\n  \"torchscript\": " << (torchscript ? torchscript_json(*torchscript) : "null");
  // null when the DDP job did not run (--ddp off, or no Python with torch).
  out << ",\n  \"ddp\": " << (ddp ? ddp_json(*ddp) : "null");
  // Empty with --bf16 off.
  out << ",\n  \"precision_rows\": [";
  for (size_t i = 0; i < precision.size(); ++i) {
    out << (i ? ",\n    " : "\n    ") << precision_json(precision[i]);
  }
  out << (precision.empty() ? "]" : "\n  ]") << "\n}\n";
  out.commit();
}

}  // namespace zt::bench
