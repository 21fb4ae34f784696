#include "report.h"

#include <cmath>
#include <cstdio>

#include "common/bench_util.h"
#include "zt/bytes.h"

namespace zt::bench {

namespace {

std::string gib(int64_t bytes) { return gib_text(static_cast<double>(bytes)); }

std::vector<const ScaleRow*> sweep_rows(const std::vector<ScaleRow>& rows) {
  std::vector<const ScaleRow*> out;
  for (const ScaleRow& r : rows) {
    if (r.job.sweep && r.job.state_bytes == 4) out.push_back(&r);  // bf16 twins aside
  }
  return out;
}

// The deepest sweep row's peak RSS per rank over the shallowest's; NaN without two rows.
double depth_ratio(const std::vector<const ScaleRow*>& sweep) {
  if (sweep.size() < 2 || sweep.front()->peak_rss_per_rank <= 0) return std::nan("");
  return static_cast<double>(sweep.back()->peak_rss_per_rank) / sweep.front()->peak_rss_per_rank;
}

void print_rows(const std::vector<ScaleRow>& rows) {
  std::printf("\n| job | params | model states | theory | host RAM (peak RSS, all ranks) | "
              "fit estimate | peak RSS/rank | disk | steps | step s | tokens/s | loss |\n");
  std::printf(
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const ScaleRow& r : rows) {
    std::printf("| %s | %.3fB | %s | %s | %s | %s | %s | %s | %lld | %.2f | %.1f | %.4f |\n",
                r.job.label.c_str(), r.params / 1e9, gib(r.model_state_bytes).c_str(),
                gib(r.model_state_theory).c_str(), gib(r.host_ram_bytes).c_str(),
                gib(r.host_ram_estimate).c_str(),
                mib_text(static_cast<double>(r.peak_rss_per_rank)).c_str(),
                gib(r.disk_bytes).c_str(), static_cast<long long>(r.steps), r.step_s,
                r.tokens_per_s, r.loss);
  }
}

void print_splits(const std::vector<ScaleRow>& rows) {
  std::printf("\nwhere a step's time goes (rank 0, median step):\n\n| job | step s | compute | "
              "read wait | write wait | comm wait | optimizer |\n| --- | ---: | ---: | ---: | "
              "---: | ---: | ---: |\n");
  for (const ScaleRow& r : rows) {
    if (!r.split.measured) {
      std::printf("| %s | %.2f | (the trainer does not report engine times) | | | | |\n",
                  r.job.label.c_str(), r.step_s);
      continue;
    }
    const StepSplit& t = r.split;
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.job.label.c_str(), r.step_s,
                t.compute, t.read_wait, t.write_wait, t.comm_wait, t.optimizer);
  }
}

// max(compute, the disk's time for the step's bytes): what the step cannot beat.
double bound_s(const ScaleRow& r, const DiskBounds& disk) {
  return std::max(r.split.compute, disk.step_s(r));
}

void print_bytes(const std::vector<ScaleRow>& rows, const DiskBounds& disk) {
  std::printf("\ntier bytes per parameter per step (rank 0's share) and the step against its "
              "bounds:\n\n| job | read B/param | written B/param | total | minimum | step s | "
              "compute s | disk s | read wait | write wait | comm wait | collectives GB | "
              "step / max(compute, disk) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | "
              "---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const ScaleRow& r : rows) {
    const double bound = bound_s(r, disk);
    std::printf("| %s | %.1f | %.1f | %.1f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | "
                "%.2f | %.2f |\n",
                r.job.label.c_str(), r.read_per_param(), r.written_per_param(),
                r.read_per_param() + r.written_per_param(),
                min_read_per_param(r.job.state_bytes) + min_written_per_param(r.job.state_bytes),
                r.step_s, r.split.compute, disk.step_s(r), r.split.read_wait, r.split.write_wait,
                r.split.comm_wait, r.collectives_per_step / 1e9,
                bound > 0 ? r.step_s / bound : 0.0);
  }
  if (disk.write_bps > 0) {
    std::printf("\ndisk: dd O_DIRECT over %.1f GB: write %.2f GB/s, read %.2f GB/s; disk s: "
                "every rank's tier bytes of a step at those rates (one disk); minimum: %.0f read "
                "+ %.0f written with fp32 moments, %.0f + %.0f with bf16 ones "
                "(docs/architecture.md, \"Offload\"); target: step <= %.2fx max(compute, disk)\n",
                disk.bytes / 1e9, disk.write_bps / 1e9, disk.read_bps / 1e9, min_read_per_param(4),
                min_written_per_param(4), min_read_per_param(2), min_written_per_param(2),
                kMaxStepOverBound);
  }
}

void print_depth(const std::vector<const ScaleRow*>& sweep) {
  if (sweep.empty()) return;
  std::printf(
      "\npeak RSS per rank against depth (fixed width):\n\n| blocks | params | peak RSS/rank "
      "| fit estimate/rank | vs %lld blocks |\n| ---: | ---: | ---: | ---: | ---: |\n",
      static_cast<long long>(sweep.front()->job.depth));
  for (const ScaleRow* r : sweep) {
    std::printf("| %lld | %.1fM | %s | %s | %.3f |\n", static_cast<long long>(r->job.depth),
                r->params / 1e6, mib_text(static_cast<double>(r->peak_rss_per_rank)).c_str(),
                mib_text(static_cast<double>(r->rss_estimate_per_rank)).c_str(),
                static_cast<double>(r->peak_rss_per_rank) / sweep.front()->peak_rss_per_rank);
  }
  if (sweep.size() >= 2) {
    const double ratio = depth_ratio(sweep);
    std::printf("\npeak RSS per rank, %lld blocks over %lld: %.3f (target <= %.1f: %s)\n",
                static_cast<long long>(sweep.back()->job.depth),
                static_cast<long long>(sweep.front()->job.depth), ratio, kMaxDepthRssRatio,
                ratio <= kMaxDepthRssRatio ? "met" : "missed");
  }
}

}  // namespace

void print_report(const std::vector<ScaleRow>& rows, const DiskBounds& disk) {
  print_rows(rows);
  print_splits(rows);
  print_bytes(rows, disk);
  print_depth(sweep_rows(rows));
  std::printf("\nmodel states: every rank's parameters, gradients, master weights and optimizer "
              "states in all tiers, next to ZeRO's theory as the trainer's summary gives it "
              "(stage 3, fp32, offloaded: 20 bytes per parameter, the master its own copy as in "
              "DeepSpeed's offload); host RAM: the ranks' peak RSS (VmHWM) summed, next to the "
              "memory-fit check's estimate; disk: bytes in offload_nvme's files.\n");
}

void write_json(const std::vector<ScaleRow>& rows, const DiskBounds& disk, const std::string& path,
                double total_s) {
  ResultsFile out(path);
  out << "{\n  \"bench\": \"scale\",\n  " << blas_json()
      << ",\n  \"disk\": {\"dd_bytes\": " << json_number(disk.bytes)
      << ", \"write_bytes_per_s\": " << json_number(disk.write_bps)
      << ", \"read_bytes_per_s\": " << json_number(disk.read_bps)
      << "},\n  \"min_tier_bytes_per_param\": {\"read\": " << json_number(min_read_per_param(4))
      << ", \"written\": " << json_number(min_written_per_param(4))
      << ", \"read_bf16_states\": " << json_number(min_read_per_param(2))
      << ", \"written_bf16_states\": " << json_number(min_written_per_param(2))
      << "},\n  \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const ScaleRow& r = rows[i];
    out << "    {\"job\": " << json_string(r.job.label) << ", \"depth\": " << r.job.depth
        << ", \"state_bytes\": " << r.job.state_bytes << ", \"params\": " << r.params
        << ", \"world\": " << r.world << ", \"model_state_bytes\": " << r.model_state_bytes
        << ", \"model_state_theory_bytes\": " << r.model_state_theory
        << ", \"host_ram_bytes\": " << r.host_ram_bytes
        << ", \"host_ram_estimate_bytes\": " << r.host_ram_estimate
        << ", \"peak_rss_per_rank\": " << r.peak_rss_per_rank
        << ", \"rss_estimate_per_rank\": " << r.rss_estimate_per_rank
        << ", \"disk_bytes\": " << r.disk_bytes << ", \"steps\": " << r.steps
        << ", \"step_s\": " << json_number(r.step_s)
        << ", \"tokens_per_s\": " << json_number(r.tokens_per_s)
        << ", \"loss\": " << json_number(r.loss) << ", \"step_split_s\": ";
    if (r.split.measured) {
      out << "{\"compute\": " << json_number(r.split.compute)
          << ", \"read_wait\": " << json_number(r.split.read_wait)
          << ", \"write_wait\": " << json_number(r.split.write_wait)
          << ", \"comm_wait\": " << json_number(r.split.comm_wait)
          << ", \"optimizer\": " << json_number(r.split.optimizer) << "}";
    } else {
      out << "null";
    }
    out << ", \"tier_bytes_per_step\": {\"read\": " << json_number(r.read_per_step)
        << ", \"written\": " << json_number(r.written_per_step)
        << ", \"read_per_param\": " << json_number(r.read_per_param())
        << ", \"written_per_param\": " << json_number(r.written_per_param())
        << "}, \"collective_bytes_per_step\": " << json_number(r.collectives_per_step)
        << ", \"disk_s\": " << json_number(disk.step_s(r)) << ", \"step_over_bound\": "
        << json_number(bound_s(r, disk) > 0 ? r.step_s / bound_s(r, disk) : 0.0)
        << ", \"wall_s\": " << json_number(r.wall_s) << "}" << (i + 1 < rows.size() ? "," : "")
        << "\n";
  }
  out << "  ],\n  \"depth\": [";
  const std::vector<const ScaleRow*> sweep = sweep_rows(rows);
  for (size_t i = 0; i < sweep.size(); ++i) {
    out << (i ? ", " : "") << "{\"blocks\": " << sweep[i]->job.depth
        << ", \"peak_rss_per_rank\": " << sweep[i]->peak_rss_per_rank << "}";
  }
  out << "],\n  \"depth_rss_ratio\": " << json_number(depth_ratio(sweep))
      << ",\n  \"depth_rss_ratio_target\": " << kMaxDepthRssRatio
      << ",\n  \"total_s\": " << json_number(total_s) << "\n}\n";
  out.commit();
}

}  // namespace zt::bench
