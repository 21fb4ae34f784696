// zt_bench_train: tokens/s and model-state bytes per rank of the real trainer for ZeRO stages 0-3
// and both shard strategies, next to stage 0 (plain data parallel), to ZeRO theory
// (docs/architecture.md, "Benchmarks") and to PyTorch DDP on the same GPT, weights, data and
// schedule (tokens/s and the largest loss difference), then the offload configurations
// (kOffloads): step time next to the same stage without offload, and model-state bytes per tier,
// then the built-in GPT against the same GPT as TorchScript (stage 3, shard_bucket): tokens/s
// of each, and last zt's stage 3 and DDP in fp32 and bf16 compute: tokens/s against each other
// and model FLOP/s per rank against the machine's sgemm peak. Each configuration is one job of 2
// local ranks on a ~11M-parameter GPT (or configs/zero3.toml's ~4.8M one); the jobs run one after
// another, interleaved over repetitions, and the bench prints five tables and the targets and
// writes bench-results/train.json. It exits non-zero only when a job failed; without a Python that
// can run torch it says so and leaves the DDP and TorchScript tables out.
#include <linux/magic.h>
#include <stdlib.h>
#include <sys/statfs.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_train.h"
#include "metrics_file.h"
#include "report.h"
#include "trainer_job.h"
#include "zt/error.h"
#include "zt/host/blas.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_train [--steps N] [--warmup N] [--reps N] [--offload on|off] [--nvme-path "
    "DIR]\n"
    "                      [--torchscript on|off] [--ddp on|off] [--bf16 on|off]\n"
    "                      [--model bench|zero3]\n"
    "                      [--python PATH] [--json PATH] [--trainer PATH]\n"
    "  Runs the trainer (configs/zero3.toml, 2 ranks, a ~11M-parameter GPT) for ZeRO stages 0-3\n"
    "  with shard_tensor and shard_bucket; prints tokens/s, step time against stage 0 and\n"
    "  model-state bytes per rank against theory, and the targets. PyTorch DDP trains the same\n"
    "  GPT from the same weights on the same data (bench/train/ddp_gpt.py): zt's tokens/s over\n"
    "  DDP's and the largest loss difference of each row. Then 5 offload configurations\n"
    "  with shard_bucket (stage 3: optimizer states in offload_cpu or offload_nvme, parameters\n"
    "  also in offload_cpu or offload_nvme; stage 1: optimizer states in offload_nvme): step time\n"
    "  against no offload and bytes per tier. Then the same GPT as TorchScript (model.kind =\n"
    "  torchscript, stage 3, shard_bucket): its tokens/s against the built-in GPT's, target at\n"
    "  least 0.90x. Then zt's stage 3 with bf16 compute and DDP under bf16 autocast: tokens/s\n"
    "  against DDP in fp32 and bf16, and model FLOP/s per rank against the sgemm peak the\n"
    "  trainer measured. Writes PATH.\n"
    "  --steps      training steps per job (default 14)\n"
    "  --warmup     leading steps of each job left out of the medians (default 3)\n"
    "  --reps       interleaved passes over the 14 jobs; medians pool them (default 2)\n"
    "  --offload    off: no offload jobs, about half the time (default on)\n"
    "  --nvme-path  folder for offload_nvme's files, on the disk to measure (default: in the\n"
    "               bench's scratch folder, or beside PATH when that is on tmpfs or ramfs)\n"
    "  --torchscript off: no TorchScript job (default on; skipped with a note when PATH of\n"
    "               --python cannot write the file, e.g. without python3-torch)\n"
    "  --ddp        off: no DDP job, and the zt jobs start from their own seeded init (default\n"
    "               on; skipped with a note when PATH of --python cannot run torch)\n"
    "  --bf16       off: no bf16 jobs (default on; DDP's needs --ddp on)\n"
    "  --model      bench: the ~10.8M-parameter bench GPT (default); zero3: configs/zero3.toml's\n"
    "               own ~4.8M-parameter GPT\n"
    "  --python     the Python with torch that writes the TorchScript GPT and the initial\n"
    "               weights and runs DDP (default /usr/bin/python3, Debian's python3-torch)\n"
    "  --json       results file (default bench-results/train.json, relative to the current "
    "folder)\n"
    "  --trainer    trainer executable (default: the one built with the bench)\n";

int parse_count(const std::string& text, const std::string& flag, int least) {
  size_t used = 0;
  long v = -1;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v < least || v > 100000) {
    throw ConfigError(flag + " takes an integer >= " + std::to_string(least) + ", got '" + text +
                      "'\n" + kUsage);
  }
  return static_cast<int>(v);
}

// Accepts "--flag value" and "--flag=value". Returns false for --help.
bool parse_args(const std::vector<std::string>& args, Plan& plan) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i,
                     {"--steps", "--warmup", "--reps", "--offload", "--nvme-path", "--torchscript",
                      "--ddp", "--bf16", "--model", "--python", "--json", "--trainer"},
                     kUsage, flag, value)) {
      return false;
    }
    if (flag == "--steps") {
      plan.steps = parse_count(value, flag, 1);
    } else if (flag == "--warmup") {
      plan.warmup = parse_count(value, flag, 0);
    } else if (flag == "--reps") {
      plan.reps = parse_count(value, flag, 1);
    } else if (flag == "--offload" || flag == "--torchscript" || flag == "--ddp" ||
               flag == "--bf16") {
      if (value != "on" && value != "off") {
        throw ConfigError(flag + " takes on or off, got '" + value + "'\n" + kUsage);
      }
      (flag == "--offload" ? plan.offload
       : flag == "--ddp"   ? plan.ddp
       : flag == "--bf16"  ? plan.bf16
                           : plan.torchscript) = value == "on";
    } else if (flag == "--model") {
      if (value != "bench" && value != "zero3") {
        throw ConfigError("--model takes bench or zero3, got '" + value + "'\n" + kUsage);
      }
      plan.model = value;
    } else if (flag == "--python") {
      plan.python = value;
    } else if (flag == "--nvme-path") {
      plan.nvme_path = value;
    } else if (flag == "--json") {
      plan.json_path = value;
    } else {
      plan.trainer = value;
    }
  }
  if (plan.warmup >= plan.steps) {
    throw ConfigError("--warmup " + std::to_string(plan.warmup) + " leaves none of the " +
                      std::to_string(plan.steps) + " steps to measure; raise --steps");
  }
  return true;
}

// True when `path` is on a file system in host memory, where offload_nvme would measure memory
// copies (tmpfs, ramfs).
bool in_memory_fs(const std::string& path) {
  struct statfs fs;
  return ::statfs(path.c_str(), &fs) == 0 &&
         (fs.f_type == static_cast<decltype(fs.f_type)>(TMPFS_MAGIC) ||
          fs.f_type == static_cast<decltype(fs.f_type)>(RAMFS_MAGIC));
}

// offload_nvme's folder when --nvme-path is not given: <scratch>/nvme, or a private folder
// beside the results file when the scratch folder is in memory (/tmp on tmpfs). The trainer
// removes its own files; this removes the folder.
class NvmeDir {
 public:
  NvmeDir(const Plan& plan, const std::string& scratch) {
    if (!plan.offload || !plan.nvme_path.empty()) return;
    if (!in_memory_fs(scratch)) {
      path_ = scratch + "/nvme";
      return;
    }
    const std::filesystem::path parent = std::filesystem::path(plan.json_path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    std::string tmpl = ((parent.empty() ? "." : parent.string()) + "/zt_bench_train-nvme.XXXXXX");
    if (!::mkdtemp(tmpl.data())) {
      throw IoError("cannot create " + tmpl + " for offload_nvme's files; pass --nvme-path DIR");
    }
    path_ = tmpl;
    owned_ = true;
  }
  ~NvmeDir() {
    std::error_code ec;
    if (owned_) std::filesystem::remove_all(path_, ec);
  }
  NvmeDir(const NvmeDir&) = delete;
  NvmeDir& operator=(const NvmeDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

std::string job_name(const JobSpec& job) {
  if (job.ddp)
    return std::string("ddp") + (job.bf16 ? "_bf16" : "") + "_r" + std::to_string(job.rep);
  std::string name = "s" + std::to_string(job.stage) + "_" + job.strategy.name;
  if (*job.offload_optimizer) name += std::string("_opt-") + job.offload_optimizer;
  if (*job.offload_param) name += std::string("_par-") + job.offload_param;
  if (!job.torchscript.empty()) name += "_torchscript";
  if (job.bf16) name += "_bf16";
  return name + "_r" + std::to_string(job.rep);
}

// "stage 3 bucket", "stage 3 bucket opt:nvme par:cpu" (offload_nvme, offload_cpu),
// "stage 3 bucket torchscript" or "stage 3 bucket bf16"
std::string job_label(const JobSpec& job) {
  if (job.ddp) return job.bf16 ? "PyTorch DDP bf16 autocast" : "PyTorch DDP";
  auto tier = [](const char* plugin) {
    const std::string id = plugin;
    return id.rfind("offload_", 0) == 0 ? id.substr(8) : id;
  };
  std::string label = "stage " + std::to_string(job.stage) + " " + job.strategy.name;
  if (*job.offload_optimizer) label += " opt:" + tier(job.offload_optimizer);
  if (*job.offload_param) label += " par:" + tier(job.offload_param);
  if (!job.torchscript.empty()) label += " torchscript";
  if (job.bf16) label += " bf16";
  return label;
}

// The environment the DDP job runs in: the OpenBLAS core the trainer gives its ranks, so both
// sides multiply with the same kernels.
std::vector<std::string> ddp_env() {
  std::vector<std::string> env;
  for (const auto& [name, value] : blas_env_for_children(probe_blas())) {
    env.push_back(name + "=" + value);
  }
  return env;
}

// The trainer's resolved config the DDP job trains as (resolve_job_configs writes both).
std::string job_config_path(const std::string& scratch, bool bf16) {
  return scratch + (bf16 ? "/job_config_bf16.toml" : "/job_config.toml");
}

// Runs one job and reads its results. Returns false (after saying why) when the trainer failed.
bool run_job(const Plan& plan, const JobSpec& job, const std::string& scratch,
             const std::string& weights, JobResult& result) {
  const std::string name = job_name(job);
  const std::string out_dir = scratch + "/" + name;
  const std::string log = scratch + "/" + name + ".log";
  const std::string metrics = out_dir + "/metrics.jsonl";
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  const auto start = std::chrono::steady_clock::now();
  const int code = run_logged(job.ddp ? ddp_train_command(plan, job_config_path(scratch, job.bf16),
                                                          weights, metrics, ddp_env())
                                      : trainer_command(plan, job, out_dir, weights),
                              log);
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (code != 0) {
    std::fprintf(stderr,
                 "zt_bench_train: error: the %s (%s) exited with %d; its last "
                 "lines:\n%s",
                 job.ddp ? "DDP job" : "trainer", job_label(job).c_str(), code,
                 tail_lines(log, 15).c_str());
    return false;
  }
  if (job.ddp) {
    trainer::RunMetrics run;
    read_step_metrics(metrics, plan.warmup, result, run);
    result.world = kRanks;
    return true;
  }
  read_metrics(metrics, plan.warmup, result);
  read_trainer_log(log, result);
  return true;
}

// Runs `argv` (the plan's Python and a script) to write `file`. Returns the file, or "" after a
// note saying why there is none: `row` is a comparison the machine may be unable to make (no
// python3-torch), not a failure of the trainer.
std::string python_writes(const Plan& plan, const std::vector<std::string>& argv,
                          const std::string& file, const std::string& row) {
  const std::string skip = "zt_bench_train: note: no " + row + " row: ";
  std::error_code ec;
  if (!std::filesystem::exists(plan.python, ec)) {
    std::printf("%s%s does not exist (install python3-torch, or pass --python PATH)\n",
                skip.c_str(), plan.python.c_str());
    return "";
  }
  const std::string log = file + ".log";
  if (run_logged(argv, log) == 0 && std::filesystem::exists(file, ec)) return file;
  const std::string said = tail_lines(log, 6);
  if (said.find("No module named 'torch'") != std::string::npos) {
    std::printf("%s%s has no torch (install python3-torch, or pass --python PATH)\n", skip.c_str(),
                plan.python.c_str());
  } else {
    std::printf("%s%s %s failed; its last lines:\n%s", skip.c_str(), plan.python.c_str(),
                argv[1].c_str(), said.c_str());
  }
  return "";
}

// The trainer's resolved configs of the plan's job, in fp32 and bf16 compute (job_config_path):
// the GPT's sizes for the Python helpers, and what the DDP jobs train as. Throws IoError when the
// trainer fails.
GptSizes resolve_job_configs(const Plan& plan, const std::string& scratch) {
  for (bool bf16 : {false, true}) {
    const std::string path = job_config_path(scratch, bf16);
    if (run_logged(print_config_command(plan, bf16), path) != 0) {
      throw IoError("the trainer could not resolve the bench's config; it said:\n" +
                    tail_lines(path, 15));
    }
  }
  return read_gpt_sizes(job_config_path(scratch, false));
}

int run(const std::vector<std::string>& argv) {
  // Ctrl-C ends the bench after the job it waits for, its scratch folders removed.
  stop_on_signals();
  Plan plan;
  if (!parse_args(argv, plan)) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (plan.trainer.empty()) plan.trainer = ZT_BENCH_TRAINER;
  const auto start = std::chrono::steady_clock::now();
  ScratchDir scratch("zt_bench_train");
  NvmeDir nvme(plan, scratch.path());
  if (plan.nvme_path.empty()) plan.nvme_path = nvme.path();
  const GptSizes gpt = resolve_job_configs(plan, scratch.path());
  const std::string torchscript =
      plan.torchscript
          ? python_writes(plan, torchscript_gpt_command(plan, gpt, scratch.path() + "/gpt.pt"),
                          scratch.path() + "/gpt.pt", "TorchScript")
          : std::string();
  const std::string weights =
      plan.ddp ? python_writes(plan, ddp_weights_command(plan, gpt, scratch.path() + "/init.st"),
                               scratch.path() + "/init.st", "DDP")
               : std::string();
  // Every repetition runs all jobs, DDP first, the offload ones after the 8 without. The
  // TorchScript job runs right after the built-in job it is compared with, so drift of the
  // machine between the two is the least it can be.
  std::vector<JobSpec> pass;
  if (!weights.empty()) {
    JobSpec ddp;
    ddp.ddp = true;
    pass.push_back(ddp);
    if (plan.bf16) {
      ddp.bf16 = true;
      pass.push_back(ddp);
    }
  }
  for (int stage : kStages) {
    for (const Strategy& strategy : kStrategies) {
      pass.push_back(JobSpec{stage, strategy, 0});
      if (!torchscript.empty() && stage == kTorchScriptStage &&
          std::string(strategy.plugin) == kTorchScriptStrategy.plugin) {
        JobSpec job{stage, strategy, 0};
        job.torchscript = torchscript;
        pass.push_back(job);
      }
      if (plan.bf16 && stage == 3 && std::string(strategy.plugin) == kDdpTargetStrategy.plugin) {
        JobSpec job{stage, strategy, 0};
        job.bf16 = true;
        pass.push_back(job);
      }
    }
  }
  if (plan.offload) {
    for (const Offload& o : kOffloads) {
      pass.push_back(JobSpec{o.stage, kOffloadStrategy, 0, o.optimizer, o.param});
    }
  }
  const int total = plan.reps * static_cast<int>(pass.size());
  std::printf("zt_bench_train: %d trainer jobs (%d steps each, %d ranks) with %s\n", total,
              plan.steps, kRanks, plan.trainer.c_str());
  std::printf("%s\n", zt::bench::blas_line().c_str());
  if (plan.offload) std::printf("  offload_nvme files under %s\n", plan.nvme_path.c_str());
  if (!torchscript.empty()) {
    std::printf("  TorchScript GPT written by %s %s\n", plan.python.c_str(),
                torchscript_gpt_command(plan, gpt, torchscript)[1].c_str());
  }
  if (!weights.empty()) {
    const std::vector<std::string> env = ddp_env();
    std::printf("  every job starts from the weights %s writes; DDP runs with %s\n",
                ddp_weights_command(plan, gpt, weights)[1].c_str(),
                env.empty() ? "the BLAS core OpenBLAS picks" : env.front().c_str());
  }
  std::vector<std::pair<JobSpec, JobResult>> jobs;
  for (int rep = 0; rep < plan.reps; ++rep) {
    for (JobSpec job : pass) {
      job.rep = rep;
      JobResult result;
      if (!run_job(plan, job, scratch.path(), weights, result)) return 1;
      jobs.emplace_back(job, result);
      std::printf("  [%2zu/%d] %-32s rep %d: %.3f s/step (median), %.0f s\n", jobs.size(), total,
                  job_label(job).c_str(), rep + 1, median(result.step_time_s), result.wall_s);
      std::fflush(stdout);
    }
  }

  std::vector<Row> rows = aggregate(jobs);
  const std::optional<DdpRow> ddp = aggregate_ddp(jobs);
  if (ddp) compare_with_ddp(jobs, *ddp, rows);
  const std::vector<PrecisionRow> precision = aggregate_precision(jobs);
  const std::vector<TargetCheck> checks = evaluate_targets(rows, precision);
  const Row& any = rows.front();
  std::printf("\nzt_bench_train: GPT of %lld parameters, %d ranks, offload none\n\n",
              static_cast<long long>(any.parameters), any.world);
  print_table(stdout, rows, plan);
  if (ddp) {
    std::printf("\nzt_bench_train: zt against PyTorch DDP (%s, Gloo, %d ranks, 1 thread each), "
                "the same GPT, initial weights, samples and schedule\n\n",
                plan.python.c_str(), ddp->world);
    print_ddp_table(stdout, rows, *ddp);
  }
  if (!precision.empty()) {
    std::printf("\nzt_bench_train: compute precision, zt stage 3 %s and PyTorch DDP, fp32 and "
                "bf16\n\n",
                kDdpTargetStrategy.plugin);
    print_precision_table(stdout, precision);
  }
  print_targets(stdout, checks);
  const std::vector<OffloadRow> offload = aggregate_offload(jobs, rows);
  if (!offload.empty()) {
    std::printf("\nzt_bench_train: offload, %s, zero.sub_group_size %lld (no targets)\n\n",
                kOffloadStrategy.plugin, static_cast<long long>(kOffloadSubGroup));
    print_offload_table(stdout, offload, rows);
  }
  const std::optional<TorchScriptRow> ts = aggregate_torchscript(jobs, rows);
  if (ts) {
    std::printf("\nzt_bench_train: built-in GPT vs TorchScript GPT (stage %d, %s, %d ranks)\n\n",
                kTorchScriptStage, kTorchScriptStrategy.plugin, ts->world);
    print_torchscript_table(stdout, *ts);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_json(plan.json_path, rows, checks, offload, ts, ddp, precision, plan, seconds);
  std::printf("\nwrote %s (%.0f s in all)\n", plan.json_path.c_str(), seconds);
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_train", argc, argv, zt::bench::run);
}
