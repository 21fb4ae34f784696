// zt_bench_adam: optim_hybrid_adam's CPU step against torch::optim::AdamW and against the memory
// roofline of the step, measured in the same run over the same arrays (docs/architecture.md,
// "Benchmarks"). For each size and thread count the four contestants run interleaved (A B C D A B C
// D ...) after one warm-up round, and medians are reported, since memory bandwidth drifts. Prints a
// table and the targets and writes bench-results/adam.json. ZT_ADAM_ISA picks the kernel as for the
// trainer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "bench_adam.h"
#include "contestants.h"
#include "report.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_adam [--sizes N,...] [--threads T,...] [--reps N] [--json PATH]\n"
    "  Times one Adam step of optim_hybrid_adam (fp32, and with a bf16 copy-out),\n"
    "  torch::optim::AdamW and a memory roofline pass (read p,g,m,v; write p,m,v), interleaved,\n"
    "  at each size and thread count; prints the medians and the targets and writes PATH.\n"
    "  --sizes    parameter counts in millions (default 10,50)\n"
    "  --threads  thread counts (default 1,2)\n"
    "  --reps     interleaved rounds after one warm-up round (default 25)\n"
    "  --json     results file (default bench-results/adam.json, relative to the current folder)\n";

// Accepts "--flag value" and "--flag=value". Returns false for --help.
bool parse_args(const std::vector<std::string>& args, Plan& plan) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i, {"--sizes", "--threads", "--reps", "--json"}, kUsage, flag, value))
      return false;
    if (flag == "--sizes") {
      plan.sizes.clear();
      for (int64_t m : parse_positive_list(value, flag, kUsage))
        plan.sizes.push_back(m * 1'000'000);
    } else if (flag == "--threads") {
      plan.threads.clear();
      for (int64_t t : parse_positive_list(value, flag, kUsage))
        plan.threads.push_back(static_cast<int>(t));
    } else if (flag == "--reps") {
      plan.reps = static_cast<int>(parse_positive(value, flag, kUsage));
    } else {
      plan.json_path = value;
    }
  }
  return true;
}

// The rows of one size and thread count: a warm-up round, then plan.reps interleaved rounds.
std::vector<Row> measure(Contestants& contestants, int64_t params, int threads, int reps) {
  set_threads(threads);
  for (const char* impl : kImpls) contestants.step(impl);
  std::vector<std::vector<double>> times(std::size(kImpls));
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t k = 0; k < std::size(kImpls); ++k) times[k].push_back(contestants.step(kImpls[k]));
  }
  std::vector<Row> rows;
  for (size_t k = 0; k < std::size(kImpls); ++k) {
    Row r;
    r.impl = kImpls[k];
    r.params = params;
    r.threads = threads;
    r.samples = reps;
    r.step_s = median(times[k]);
    rows.push_back(r);
  }
  return rows;
}

int run(const std::vector<std::string>& argv) {
  Plan plan;
  if (!parse_args(argv, plan)) {
    std::printf("%s", kUsage);
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  std::printf("zt_bench_adam on %s: %d rounds per size and thread count, zt kernel %s\n",
              cpu_model().c_str(), plan.reps, zt_kernel().c_str());
  std::printf("%s\n", zt::bench::blas_line().c_str());
  std::vector<Row> rows;
  for (int64_t params : plan.sizes) {
    Contestants contestants(params);  // freed before the next size is allocated
    for (int threads : plan.threads) {
      const std::vector<Row> measured = measure(contestants, params, threads, plan.reps);
      rows.insert(rows.end(), measured.begin(), measured.end());
      std::printf("  %lldM params, %d thread(s): done\n", static_cast<long long>(params / 1000000),
                  threads);
      std::fflush(stdout);
    }
  }
  const std::vector<TargetCheck> checks = evaluate_targets(rows);
  std::printf("\n");
  print_table(stdout, rows);
  print_targets(stdout, checks);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_json(plan.json_path, rows, checks, plan, seconds);
  std::printf("\nwrote %s (%.0f s in all)\n", plan.json_path.c_str(), seconds);
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_adam", argc, argv, zt::bench::run);
}
