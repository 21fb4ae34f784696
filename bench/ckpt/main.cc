// zt_bench_ckpt: what a checkpoint costs the real trainer (docs/architecture.md, "Benchmarks").
// For each configuration (the bench GPT of bench/train in memory and with NVMe-offloaded states,
// and a GPT of about 1B parameters with NVMe-offloaded states) it runs trainer jobs that save
// every step synchronously, then asynchronously, then resume from the last save, and measures in
// the same run dd writing as many bytes with O_DIRECT to the same folder and one core copying
// memory. Prints a table and writes bench-results/ckpt.json; exits non-zero only when a job
// failed.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_ckpt.h"
#include "ckpt_jobs.h"
#include "common/bench_util.h"
#include "common/child_process.h"
#include "common/shell.h"
#include "report.h"
#include "zt/bytes.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_ckpt [--steps N] [--big on|off] [--dir DIR] [--json PATH] [--trainer PATH]\n"
    "  Saves checkpoints of the real trainer every step, synchronously and asynchronously, and\n"
    "  resumes from them: the bench GPT (~11M parameters, 2 ranks, stage 3) in memory and with\n"
    "  optimizer states in offload_nvme, an 85M GPT in memory, and a ~1B-parameter GPT with\n"
    "  optimizer states in offload_nvme. Compares the save with dd oflag=direct on the same folder "
    "and the\n"
    "  asynchronous stall with a memory copy, in the same run.\n"
    "  --steps  optimizer steps (and saves) per job (default 3; the 1B GPT runs 2)\n"
    "  --big    off: leave out the 1B GPT (about 10 minutes and 40 GB of disk) (default on)\n"
    "  --dir    folder for checkpoints and offload files, on the disk to measure (default\n"
    "           bench-results/ckpt-scratch); the bench works in a private folder inside it\n"
    "  --json   results file (default bench-results/ckpt.json)\n"
    "  --trainer  trainer executable (default: the one built with the bench)\n";

struct Options {
  int steps = 3;
  bool big = true;
  std::string dir = "bench-results/ckpt-scratch";
  std::string json = "bench-results/ckpt.json";
  std::string trainer = ZT_BENCH_TRAINER;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 1; i < args.size(); ++i) {  // args[0] is the program
    std::string flag, value;
    if (!next_option(args, i, {"--steps", "--big", "--dir", "--json", "--trainer"}, kUsage, flag,
                     value)) {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--steps") o.steps = static_cast<int>(parse_positive(value, flag, kUsage));
    if (flag == "--big") {
      if (value != "on" && value != "off")
        throw ConfigError("--big takes on or off\n" + std::string(kUsage));
      o.big = value == "on";
    }
    if (flag == "--dir") o.dir = value;
    if (flag == "--json") o.json = value;
    if (flag == "--trainer") o.trainer = value;
  }
  return o;
}

std::vector<CkptConfig> configs(bool big) {
  std::vector<CkptConfig> out;
  out.push_back({"bench GPT", bench_gpt_overrides(), 2, 3, "", ""});
  out.push_back({"bench GPT, NVMe states", bench_gpt_overrides(), 2, 3, "offload_nvme", ""});
  // GPT-2 small's blocks (12 x 768, 85M parameters with the byte-level vocabulary) in memory:
  // ~1 GB of checkpoint, where the fixed costs of a save (fsyncs, the publish) no longer hide
  // the write bandwidth.
  out.push_back({"85M GPT",
                 {"model.n_layer=12", "model.d_model=768", "model.n_head=12", "model.seq_len=64",
                  "model.vocab=256", "data.micro_batch=2"},
                 2,
                 3,
                 "",
                 ""});
  if (big) {
    // 20 blocks of 12 x 2048^2: 1.007B parameters. One sample of 64 tokens per rank keeps a step
    // within a minute on two cores; the parameter shards stay in host memory.
    out.push_back({"1B GPT, NVMe states",
                   {"model.n_layer=20", "model.d_model=2048", "model.n_head=16", "model.seq_len=64",
                    "model.vocab=256", "data.micro_batch=1"},
                   2,
                   3,
                   "offload_nvme",
                   ""});
  }
  return out;
}

// One core copying 256 MiB, best of 5: the least an asynchronous save's snapshot can cost.
double memcpy_gbps() {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return static_cast<double>(bytes) / best / 1e9;
}

// dd writing `bytes` (whole MiB, at least 64) with O_DIRECT into `dir`; GB/s.
double dd_direct_gbps(const std::string& dir, int64_t bytes) {
  const int64_t mib = std::max<int64_t>(64, bytes >> 20);
  const std::string file = dir + "/dd.bin";
  const double seconds = run_dd_seconds("if=/dev/zero of=" + shell_quote(file) +
                                        " bs=1M count=" + std::to_string(mib) + " oflag=direct");
  std::filesystem::remove(file);
  return static_cast<double>(mib << 20) / seconds / 1e9;
}

JobMetrics run_job(const CkptConfig& c, JobKind kind, int steps, const JobPaths& paths) {
  std::printf("  %-24s %s ...", c.label.c_str(), job_name(kind));
  std::fflush(stdout);
  const std::string log = paths.out_dir + "/" + std::string(job_name(kind)) + ".log";
  std::filesystem::create_directories(paths.out_dir);
  const auto t0 = std::chrono::steady_clock::now();
  const int code = run_logged(ckpt_job_command(c, kind, steps, paths), log);
  if (code != 0) {
    throw IoError("zt_bench_ckpt: the " + std::string(job_name(kind)) + " job of " + c.label +
                  " exited " + std::to_string(code) + ":\n" + tail_lines(log, 15));
  }
  std::printf(" %.0f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return read_job_metrics(paths.out_dir + "/metrics.jsonl");
}

CkptResult measure(const CkptConfig& c, int steps, const std::string& scratch,
                   const std::string& trainer, double copy_gbps) {
  CkptResult r;
  r.config = c;
  r.memcpy_gbps = copy_gbps;
  r.tier_buffer_bytes = int64_t{4} * 16 << 20;  // offload_nvme's defaults: 4 x 16 MiB
  const std::string nvme = scratch + "/nvme";
  JobPaths sync{trainer, scratch + "/sync", nvme}, async{trainer, scratch + "/async", nvme};
  const JobMetrics s = run_job(c, JobKind::kSync, steps, sync);
  r.save_s = median(s.stall_s);
  r.bytes = folder_bytes(s.last_folder);
  r.model_params = checkpoint_parameters(s.last_folder);
  r.disk_write_gbps = dd_direct_gbps(scratch, r.bytes);
  std::filesystem::remove_all(sync.out_dir);
  const JobMetrics a = run_job(c, JobKind::kAsync, steps, async);
  r.stall_s = median(a.stall_s);
  r.async_write_s = median(a.write_s);
  // The ranks hold equal shards (stage 3), so one rank copies its share of the files.
  r.rank_bytes = a.checkpoint_bytes / c.world;
  r.peak_rss_async = a.rank0_peak_rss;
  r.load_s = run_job(c, JobKind::kResume, steps, async).load_s;
  std::filesystem::remove_all(async.out_dir);
  if (r.offloaded_to_files()) {
    JobPaths plain{trainer, scratch + "/plain", nvme};
    r.peak_rss_no_ckpt = run_job(c, JobKind::kNoCheckpoint, steps, plain).rank0_peak_rss;
    std::filesystem::remove_all(plain.out_dir);
  }
  return r;
}

int run(const std::vector<std::string>& args) {
  // Ctrl-C ends the bench after the job it waits for, its scratch folders removed.
  stop_on_signals();
  const Options o = parse(args);
  std::filesystem::create_directories(o.dir);
  ScratchIn scratch(o.dir);
  std::printf("zt_bench_ckpt: checkpoints in %s\n  %s\n", scratch.path().c_str(),
              blas_line().c_str());
  const double copy_gbps = memcpy_gbps();
  std::vector<CkptResult> results;
  for (const CkptConfig& c : configs(o.big)) {
    const int steps = c.label.rfind("1B", 0) == 0 ? std::min(o.steps, 2) : o.steps;
    results.push_back(measure(c, steps, scratch.path(), o.trainer, copy_gbps));
  }
  print_report(results);
  write_json(results, o.json);
  std::printf("results: %s\n", o.json.c_str());
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_ckpt", argc, argv, zt::bench::run);
}
