// zt_bench_nvme: offload_nvme's write and read bandwidth against plain buffered file I/O and
// against dd with O_DIRECT (the device's direct-I/O bandwidth as a standard tool gets it), in
// one run, on one folder (docs/architecture.md, "Benchmarks"). Rounds are interleaved (A B C A B C
// ...) after one warm-up round, and medians reported, since a shared disk drifts. Prints a markdown
// table and the target and writes bench-results/nvme.json.
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/bench_util.h"
#include "common/shell.h"
#include "engines.h"
#include "report.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_nvme [--dir DIR] [--mib N] [--reps N] [--queue-depth N] [--json PATH]\n"
    "  Writes and reads N MiB with offload_nvme (1 MiB requests, O_DIRECT, io_uring), with\n"
    "  buffered pwrite+fsync / pread (page cache dropped first), and with dd oflag/iflag=direct\n"
    "  bs=1M, interleaved, on files in one folder; prints medians and the target, writes PATH.\n"
    "  --dir          folder to test in; a private subfolder is made there and removed\n"
    "                 (default: runs/ under the current folder, i.e. the repository's disk)\n"
    "  --mib          MiB per file (default 1024)\n"
    "  --reps         interleaved rounds after one warm-up round (default 5)\n"
    "  --queue-depth  offload_nvme's queue_depth (default 8)\n"
    "  --json         results file (default bench-results/nvme.json, relative to the\n"
    "                 current folder)\n";

struct Plan {
  std::string dir = "runs";
  int64_t mib = 1024;
  int reps = 5;
  int queue_depth = 8;
  std::string json_path = "bench-results/nvme.json";
};

bool parse_args(const std::vector<std::string>& args, Plan& plan) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i, {"--dir", "--mib", "--reps", "--queue-depth", "--json"}, kUsage, flag,
                     value)) {
      return false;
    }
    if (flag == "--dir") plan.dir = value;
    else if (flag == "--mib") plan.mib = parse_positive(value, flag, kUsage);
    else if (flag == "--reps") plan.reps = static_cast<int>(parse_positive(value, flag, kUsage));
    else if (flag == "--queue-depth")
      plan.queue_depth = static_cast<int>(parse_positive(value, flag, kUsage));
    else plan.json_path = value;
  }
  return true;
}

int run(const std::vector<std::string>& argv) {
  // Ctrl-C ends the bench between two files' rounds, its files removed.
  stop_on_signals();
  Plan plan;
  if (!parse_args(argv, plan)) {
    std::printf("%s", kUsage);
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  ScratchIn scratch(plan.dir);
  RunInfo info;
  info.dir = scratch.path();
  info.bytes = plan.mib << 20;
  info.reps = plan.reps;
  info.queue_depth = plan.queue_depth;
  // findmnt names ext4 as ext4 (stat -f cannot tell it from ext2) and the device under it.
  ShellResult fs = run_shell("findmnt -T " + shell_quote(scratch.path()) + " -no FSTYPE,SOURCE");
  if (fs.exit_code != 0) fs = run_shell("stat -f -c %T " + shell_quote(scratch.path()));
  if (fs.exit_code == 0) {
    std::istringstream words(fs.output.substr(0, fs.output.find('\n')));
    std::string type, source;
    words >> type >> source;
    info.file_system = source.empty() ? type : type + " on " + source;
  } else {
    info.file_system = "unknown";
  }

  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<Row> rows;
  for (const char* op : {"write", "read"}) {
    for (const char* name : kEngines) rows.push_back({name, op, {}, info.bytes});
  }
  for (const char* name : kEngines) {
    engines.push_back(make_engine(name, scratch.path(), info.bytes, plan.queue_depth));
    info.engines[name] = engines.back()->describe();
  }
  std::printf("zt_bench_nvme: %lld MiB per file in %s (%s), %d rounds after one warm-up\n",
              static_cast<long long>(plan.mib), scratch.path().c_str(), info.file_system.c_str(),
              plan.reps);
  std::printf("%s\n", zt::bench::blas_line().c_str());
  for (size_t e = 0; e < engines.size(); ++e) {
    std::printf("  %-12s %s\n", kEngines[e], info.engines[kEngines[e]].c_str());
  }
  std::fflush(stdout);

  const size_t n = engines.size();
  for (int rep = -1; rep < plan.reps; ++rep) {
    for (size_t e = 0; e < n; ++e) {
      const double s = engines[e]->write();
      if (rep >= 0) rows[e].seconds.push_back(s);
      stop_if_signalled(std::string("writing with ") + kEngines[e]);
    }
    for (size_t e = 0; e < n; ++e) {
      const double s = engines[e]->read();
      if (rep >= 0) rows[n + e].seconds.push_back(s);
      stop_if_signalled(std::string("reading with ") + kEngines[e]);
      if (rep < 0 && !engines[e]->verify()) {
        throw IoError(std::string("zt_bench_nvme: ") + kEngines[e] +
                      " read back different bytes than it wrote");
      }
    }
    const std::string round = rep < 0 ? "warm-up round" : "round " + std::to_string(rep + 1);
    std::printf("  %s done\n", round.c_str());
    std::fflush(stdout);
  }
  engines.clear();  // files and the tier's folder go before the scratch folder

  const std::vector<TargetCheck> checks = evaluate_targets(rows);
  std::printf("\n");
  print_table(stdout, rows);
  print_targets(stdout, checks);
  info.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_json(plan.json_path, rows, checks, info);
  std::printf("\nwrote %s (%.0f s in all)\n", plan.json_path.c_str(), info.total_seconds);
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_nvme", argc, argv, zt::bench::run);
}
