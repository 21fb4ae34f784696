// zt_bench_comm: comm_ucx against LibTorch's ProcessGroupGloo and raw ucx_perftest, in one run
// (docs/architecture.md, "Benchmarks"). Run without RANK in the environment it is the parent: it
// launches itself as two local ranks, then runs the ucx_perftest pairs (after the ranks ended, so
// they do not compete for the two cores), merges the rows and writes the table and
// bench-results/comm.json. With RANK set it is one rank; rank 0 writes its rows to the file named
// by ZT_BENCH_COMM_ROWS.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_comm.h"
#include "collectives.h"
#include "report.h"
#include "ucx_perftest.h"
#include "zt/error.h"
#include "zt/host/launcher.h"
#include "zt/host/rendezvous.h"

namespace zt::bench {

namespace {

constexpr const char* kRowsEnv = "ZT_BENCH_COMM_ROWS";
// The whole two-rank job; it takes well under a minute here.
constexpr std::chrono::minutes kJobTimeout{10};

const char* kUsage =
    "usage: zt_bench_comm [--sizes MiB,...] [--reps N] [--json PATH]\n"
    "  Times comm_ucx and LibTorch's ProcessGroupGloo (all_gather, reduce_scatter, all_reduce)\n"
    "  on 2 local ranks, and ucx_perftest tag_bw, at each size; prints a table and the targets\n"
    "  and writes PATH.\n"
    "  --sizes  buffer sizes in MiB (default 1,16,64,256)\n"
    "  --reps   timed blocks per backend, op and size; medians are reported (default 7)\n"
    "  --json   results file (default bench-results/comm.json, relative to the current folder)\n";

std::vector<int64_t> parse_sizes(const std::string& list) {
  std::vector<int64_t> sizes;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = std::min(list.find(',', start), list.size());
    sizes.push_back(parse_positive(list.substr(start, comma - start), "--sizes", kUsage) * kMiB);
    start = comma + 1;
  }
  return sizes;
}

// Accepts "--flag value" and "--flag=value". Returns false for --help.
bool parse_args(const std::vector<std::string>& args, Plan& plan) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i, {"--sizes", "--reps", "--json"}, kUsage, flag, value)) return false;
    if (flag == "--sizes") {
      plan.sizes_bytes = parse_sizes(value);
    } else if (flag == "--reps") {
      plan.reps = static_cast<int>(parse_positive(value, "--reps", kUsage));
    } else {
      plan.json_path = value;
    }
  }
  return true;
}

int run_parent(const Plan& plan, const std::vector<std::string>& argv) {
  const auto start = std::chrono::steady_clock::now();
  find_ucx_perftest();  // fail before the ranks spend half a minute, not after
  ScratchDir scratch("zt_bench_comm");
  const std::string rows_path = scratch.path() + "/ranks.tsv";

  LaunchSpec spec;
  spec.nproc = kRanks;
  spec.argv = argv;
  spec.argv[0] = self_executable();
  spec.fork_ranks = true;
  spec.env = {{kRowsEnv, rows_path}};
  spec.timeout = kJobTimeout;
  LaunchResult result = launch_local(spec);
  if (result.exit_code != 0) {
    std::fprintf(stderr, "zt_bench_comm: error: the benchmark ranks failed: %s\n",
                 result.message.c_str());
    return result.exit_code;
  }
  std::vector<Row> rows = read_rows_tsv(rows_path);
  for (Row& r : run_ucx_perftest(plan, scratch.path())) rows.push_back(std::move(r));

  std::vector<TargetCheck> checks = evaluate_targets(rows);
  std::printf("\nzt_bench_comm: %d ranks on this host, fp32 sum\n%s\n\n", kRanks,
              zt::bench::blas_line().c_str());
  print_table(stdout, rows);
  print_targets(stdout, checks);
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_json(plan.json_path, rows, checks, total);
  std::printf("\nwrote %s (%.0f s in all)\n", plan.json_path.c_str(), total);
  return 0;
}

int run_rank(const Plan& plan) {
  const char* rows_path = std::getenv(kRowsEnv);
  if (!rows_path) {
    throw ConfigError(std::string("RANK is set but ") + kRowsEnv +
                      " is not; run zt_bench_comm without RANK and it launches its own ranks");
  }
  RankEnv env = discover_rank_env();
  if (env.master_addr.empty() || env.master_port == 0) {
    throw ConfigError("rank " + std::to_string(env.rank) +
                      " has no MASTER_ADDR/MASTER_PORT; run zt_bench_comm without RANK and it "
                      "launches its own ranks");
  }
  std::vector<Row> rows = run_collectives(plan, env);
  if (env.rank == 0) write_rows_tsv(rows_path, rows);
  return 0;
}

int run(const std::vector<std::string>& argv) {
  Plan plan;
  if (!parse_args(argv, plan)) {
    std::printf("%s", kUsage);
    return 0;
  }
  return std::getenv("RANK") ? run_rank(plan) : run_parent(plan, argv);
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  const char* rank = std::getenv("RANK");
  const std::string who = rank ? std::string("zt_bench_comm [rank ") + rank + "]" : "zt_bench_comm";
  try {
    return zt::bench::run(std::vector<std::string>(argv, argv + argc));
  } catch (const zt::Error& e) {
    std::fprintf(stderr, "%s: %s error: %s\n", who.c_str(), e.kind_name(), e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", who.c_str(), e.what());
    return 1;
  }
}
