// zt_bench_scale: models larger than the machine (docs/architecture.md, "Benchmarks"). Runs the
// real trainer on configs/zero3_infinity_2b.toml (a GPT of 2.0B parameters, ZeRO stage 3,
// parameters and optimizer states in offload_nvme, 2 ranks), and a depth sweep at fixed width
// with the same composition, and reports per job the model states, host RAM (peak RSS, next to
// the memory-fit check's estimate), bytes on disk, step time, tokens/s, the loss and where a
// step's time goes, then peak RSS per rank against depth. Prints markdown tables and writes
// bench-results/scale.json; exits non-zero only when a job failed.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_scale.h"
#include "common/bench_util.h"
#include "common/child_process.h"
#include "common/shell.h"
#include "report.h"
#include "scale_jobs.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_scale [--big on|off] [--steps N] [--depths A,B,C] [--width W] [--heads H]\n"
    "                      [--sweep-steps N] [--through-tier on|off] [--bf16-states on|off]\n"
    "                      [--dd-gb N] [--dir DIR]\n"
    "                      [--json PATH] [--trainer PATH]\n"
    "  Trains configs/zero3_infinity_2b.toml (2.0B parameters, 32 GB of model states, stage 3,\n"
    "  parameters and optimizer states in offload_nvme, 2 ranks) and the same composition at\n"
    "  fixed width and several depths; reports bytes per tier, peak RSS per rank next to the\n"
    "  memory-fit estimate, step time and where it goes, tier bytes per parameter against the\n"
    "  composition's minimum and the step against max(compute, the disk's time for its bytes),\n"
    "  and peak RSS against depth.\n"
    "  --big          off: leave out the 2B GPT (about 40 GB of disk, many minutes) (default on)\n"
    "  --steps        optimizer steps of the 2B GPT (default 3)\n"
    "  --depths       blocks of the sweep's GPTs (default 12,24,48)\n"
    "  --width        their d_model (default 1024)\n"
    "  --heads        their attention heads (default 16)\n"
    "  --sweep-steps  optimizer steps of each sweep job (default 2)\n"
    "  --through-tier on: also the 2B GPT with its gradients through the tier, as before the\n"
    "                 update in backward (zero.gradient_clipping = 1e30: the step waits for every\n"
    "                 gradient and never clips) (default off)\n"
    "  --bf16-states  on: also every job with Adam's moments in bf16 (optim_hybrid_adam's\n"
    "                 state_dtype = \"bf16\"), run next to its fp32 twin (default off)\n"
    "  --dd-gb        GB that dd writes and reads back with O_DIRECT in --dir after the jobs, for\n"
    "                 the disk's sustained bandwidth; 0 = no disk bound (default 16)\n"
    "  --dir          folder for the runs and offload_nvme's files, on the disk to measure\n"
    "                 (default bench-results/scale-scratch); the bench works in a private\n"
    "                 folder inside it\n"
    "  --json         results file (default bench-results/scale.json)\n"
    "  --trainer      trainer executable (default: the one built with the bench)\n";

struct Options {
  bool big = true;
  int steps = 3, sweep_steps = 2;
  std::vector<int64_t> depths = {12, 24, 48};
  bool through_tier = false;
  bool bf16_states = false;
  int64_t dd_gb = 16;
  int64_t width = 1024, heads = 16;
  std::string dir = "bench-results/scale-scratch";
  std::string json = "bench-results/scale.json";
  std::string trainer = ZT_BENCH_TRAINER;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  const std::vector<std::string> known = {
      "--big", "--steps", "--depths",  "--width",        "--heads", "--sweep-steps",
      "--dir", "--json",  "--trainer", "--through-tier", "--dd-gb", "--bf16-states"};
  for (size_t i = 1; i < args.size(); ++i) {  // args[0] is the program
    std::string flag, value;
    if (!next_option(args, i, known, kUsage, flag, value)) {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--big") {
      if (value != "on" && value != "off")
        throw ConfigError("--big takes on or off\n" + std::string(kUsage));
      o.big = value == "on";
    }
    if (flag == "--through-tier") {
      if (value != "on" && value != "off")
        throw ConfigError("--through-tier takes on or off\n" + std::string(kUsage));
      o.through_tier = value == "on";
    }
    if (flag == "--bf16-states") {
      if (value != "on" && value != "off")
        throw ConfigError("--bf16-states takes on or off\n" + std::string(kUsage));
      o.bf16_states = value == "on";
    }
    if (flag == "--dd-gb") o.dd_gb = value == "0" ? 0 : parse_positive(value, flag, kUsage);
    if (flag == "--steps") o.steps = static_cast<int>(parse_positive(value, flag, kUsage));
    if (flag == "--sweep-steps")
      o.sweep_steps = static_cast<int>(parse_positive(value, flag, kUsage));
    if (flag == "--depths") o.depths = parse_positive_list(value, flag, kUsage);
    if (flag == "--width") o.width = parse_positive(value, flag, kUsage);
    if (flag == "--heads") o.heads = parse_positive(value, flag, kUsage);
    if (flag == "--dir") o.dir = value;
    if (flag == "--json") o.json = value;
    if (flag == "--trainer") o.trainer = value;
  }
  if (o.width % o.heads != 0) {
    throw ConfigError("--width " + std::to_string(o.width) + " is not a multiple of --heads " +
                      std::to_string(o.heads) + "\n" + kUsage);
  }
  return o;
}

std::vector<ScaleJob> plan(const Options& o) {
  std::vector<ScaleJob> jobs;
  for (int64_t depth : o.depths) {
    jobs.push_back(
        {"depth " + std::to_string(depth),
         {"model.n_layer=" + std::to_string(depth), "model.d_model=" + std::to_string(o.width),
          "model.n_head=" + std::to_string(o.heads)},
         depth,
         true});
  }
  if (o.big && o.through_tier) {
    jobs.push_back({"2B GPT, gradients via tier", {"zero.gradient_clipping=1e30"}, 24, false});
  }
  if (o.big) jobs.push_back({"2B GPT", {}, 24, false});
  if (o.bf16_states) {
    // Each job's twin with bf16 moments, right after it (side by side in one run).
    std::vector<ScaleJob> both;
    for (const ScaleJob& j : jobs) {
      both.push_back(j);
      ScaleJob twin = j;
      twin.label += ", bf16 moments";
      twin.overrides.push_back("plugin.optim_hybrid_adam.state_dtype=bf16");
      twin.state_bytes = 2;
      both.push_back(twin);
    }
    jobs = both;
  }
  return jobs;
}

ScaleRow run_job(const ScaleJob& job, int steps, const std::string& scratch,
                 const std::string& trainer) {
  std::printf("  %-12s %d steps ...", job.label.c_str(), steps);
  std::fflush(stdout);
  const bool via_tier = job.label.find("via tier") != std::string::npos;
  const std::string name = (job.sweep  ? "depth" + std::to_string(job.depth)
                            : via_tier ? "big-via-tier"
                                       : "big") +
                           (job.state_bytes == 2 ? "-bf16" : "");
  const ScalePaths paths{trainer, scratch + "/" + name, scratch + "/nvme"};
  std::filesystem::create_directories(paths.out_dir);
  const std::string log = paths.out_dir + ".log";
  const auto t0 = std::chrono::steady_clock::now();
  const int code = run_logged(scale_job_command(job, steps, paths), log);
  ScaleRow row;
  row.job = job;
  row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (code != 0) {
    throw IoError("zt_bench_scale: the " + job.label + " job exited " + std::to_string(code) +
                  ":\n" + tail_lines(log, 15));
  }
  read_scale_metrics(paths.out_dir + "/metrics.jsonl", row);
  read_scale_log(log, row);
  std::filesystem::remove_all(paths.out_dir);
  std::printf(" %.0f s\n", row.wall_s);
  return row;
}

// dd with O_DIRECT writing `gb` GB into `dir` and reading them back: the disk's sustained rates.
DiskBounds measure_disk(const std::string& dir, int64_t gb) {
  DiskBounds d;
  if (gb <= 0) return d;
  std::printf("  dd O_DIRECT, %lld GB written and read back ...", static_cast<long long>(gb));
  std::fflush(stdout);
  const std::string file = dir + "/dd.bin";
  const int64_t mib = gb * 1000 * 1000 * 1000 / (1 << 20);
  d.bytes = static_cast<double>(mib) * (1 << 20);
  const double write_s = run_dd_seconds("if=/dev/zero of=" + shell_quote(file) +
                                        " bs=1M count=" + std::to_string(mib) + " oflag=direct");
  const double read_s = run_dd_seconds("if=" + shell_quote(file) +
                                       " of=/dev/null bs=1M iflag=direct");
  std::filesystem::remove(file);
  d.write_bps = d.bytes / write_s;
  d.read_bps = d.bytes / read_s;
  std::printf(" write %.2f GB/s, read %.2f GB/s\n", d.write_bps / 1e9, d.read_bps / 1e9);
  return d;
}

int run(const std::vector<std::string>& args) {
  // Ctrl-C ends the bench after the job it waits for, its scratch folders removed.
  stop_on_signals();
  const Options o = parse(args);
  std::filesystem::create_directories(o.dir);
  ScratchIn scratch(o.dir);
  std::printf("zt_bench_scale: runs and offload files in %s\n  %s\n", scratch.path().c_str(),
              blas_line().c_str());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<ScaleRow> rows;
  for (const ScaleJob& job : plan(o)) {
    rows.push_back(run_job(job, job.sweep ? o.sweep_steps : o.steps, scratch.path(), o.trainer));
  }
  const DiskBounds disk = measure_disk(scratch.path(), o.dd_gb);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_report(rows, disk);
  write_json(rows, disk, o.json, total);
  std::printf("results: %s\n", o.json.c_str());
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_scale", argc, argv, zt::bench::run);
}
