// zt_bench_adam: optim_hybrid_adam's CPU step against torch::optim::AdamW and against the
// roofline of the step (roofline.h), measured in the same run over the same arrays
// (docs/architecture.md, "Benchmarks"). Each kernel asked for (--isa) is held against the
// roofline pass compiled for its own ISA. Sizes in DRAM show the memory bound; a size in cache
// (--l2-params) shows the arithmetic, its microsecond steps timed in batches. For each size and
// thread count the contestants run interleaved (A B C ... A B C ...) after one warm-up round, and
// medians are reported, since memory bandwidth drifts. Prints a table and the targets and writes
// bench-results/adam.json.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_adam.h"
#include "contestants.h"
#include "isa.h"
#include "report.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_adam [--sizes N,...] [--l2-params N] [--threads T,...]\n"
    "                     [--isa auto|avx512|avx2|portable[,...]] [--reps N] [--json PATH]\n"
    "  Times Adam steps of optim_hybrid_adam (fp32, with a bf16 copy-out, and with bf16\n"
    "  moments) and of a roofline pass (read p,g,m,v; write p,m,v) compiled with the same ISA's\n"
    "  flags, for each ISA, and of torch::optim::AdamW, interleaved, at each size and thread\n"
    "  count; prints the medians and the targets and writes PATH.\n"
    "  --sizes      parameter counts in millions, in DRAM: memory-bound (default 10,50)\n"
    "  --l2-params  a parameter count in cache, where the arithmetic shows, run first; 0 = none\n"
    "               (default 131072: 2 MiB of p,g,m,v)\n"
    "  --threads    thread counts (default 1,2)\n"
    "  --isa        optim_hybrid_adam kernels to run, each against its own roofline; auto = the\n"
    "               best this CPU runs (default: ZT_ADAM_ISA if set, else auto); the first one's\n"
    "               rows are the targets'\n"
    "  --reps       interleaved rounds after one warm-up step each (default 25); a round takes\n"
    "               one sample of each contestant: back-to-back steps until 5 ms have passed\n"
    "  --json       results file (default bench-results/adam.json, relative to the current "
    "folder)\n";

// Accepts "--flag value" and "--flag=value". Returns false for --help.
bool parse_args(const std::vector<std::string>& args, Plan& plan) {
  std::string isas;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i, {"--sizes", "--l2-params", "--threads", "--isa", "--reps", "--json"},
                     kUsage, flag, value)) {
      return false;
    }
    if (flag == "--sizes") {
      plan.sizes.clear();
      for (int64_t m : parse_positive_list(value, flag, kUsage))
        plan.sizes.push_back(m * 1'000'000);
    } else if (flag == "--l2-params") {
      plan.l2_params = value == "0" ? 0 : parse_positive(value, flag, kUsage);
    } else if (flag == "--threads") {
      plan.threads.clear();
      for (int64_t t : parse_positive_list(value, flag, kUsage))
        plan.threads.push_back(static_cast<int>(t));
    } else if (flag == "--isa") {
      isas = value;
    } else if (flag == "--reps") {
      plan.reps = static_cast<int>(parse_positive(value, flag, kUsage));
    } else {
      plan.json_path = value;
    }
  }
  // Without --isa, the kernel the trainer would run: ZT_ADAM_ISA's, or the best.
  const char* env = std::getenv("ZT_ADAM_ISA");
  if (!isas.empty()) {
    plan.isas = parse_isas(isas, "--isa", kUsage);
  } else {
    plan.isas = parse_isas(env && *env ? env : "auto", "ZT_ADAM_ISA", kUsage);
  }
  return true;
}

struct Contestant {
  std::string impl, isa;
};

// Each ISA's contestants, in kIsaImpls' order, then AdamW.
std::vector<Contestant> contestants_of(const Plan& plan) {
  std::vector<Contestant> list;
  for (const std::string& isa : plan.isas) {
    for (const char* impl : kIsaImpls) list.push_back({impl, isa});
  }
  list.push_back({kTorchAdamW, kLibtorchIsa});
  return list;
}

// The rows of one size and thread count: a warm-up round of one step each, then plan.reps
// interleaved rounds of one sample each.
std::vector<Row> measure(Contestants& contestants, const Plan& plan, int64_t params, int threads) {
  set_threads(threads);
  const std::vector<Contestant> list = contestants_of(plan);
  for (const Contestant& c : list) contestants.run(c.impl, c.isa, 0);
  std::vector<std::vector<double>> times(list.size()), steps(list.size());
  for (int rep = 0; rep < plan.reps; ++rep) {
    for (size_t k = 0; k < list.size(); ++k) {
      const Sample s = contestants.run(list[k].impl, list[k].isa, plan.min_sample_s);
      times[k].push_back(s.seconds / s.steps);
      steps[k].push_back(s.steps);
    }
  }
  std::vector<Row> rows;
  for (size_t k = 0; k < list.size(); ++k) {
    Row r;
    r.impl = list[k].impl;
    r.isa = list[k].isa;
    r.params = params;
    r.threads = threads;
    r.samples = plan.reps;
    r.steps_per_sample = static_cast<int>(std::lround(median(steps[k])));
    r.step_s = median(times[k]);
    rows.push_back(r);
  }
  return rows;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

int run(const std::vector<std::string>& argv) {
  Plan plan;
  if (!parse_args(argv, plan)) {
    std::printf("%s", kUsage);
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  std::printf(
      "zt_bench_adam on %s: %d rounds per size and thread count; zt kernels %s (auto: %s)\n",
      cpu_model().c_str(), plan.reps, join(plan.isas).c_str(), best_isa().c_str());
  std::printf("%s\n", zt::bench::blas_line().c_str());
  std::vector<int64_t> sizes = plan.sizes;
  if (plan.l2_params > 0) {
    sizes.insert(sizes.begin(), plan.l2_params);
    std::printf("in cache: %s params, %lld KiB of p,g,m,v; this CPU's L2: %s per core\n",
                params_label(plan.l2_params).c_str(),
                static_cast<long long>(plan.l2_params * kStateBytesPerParam / 1024),
                l2_cache_label().c_str());
  }
  std::vector<Row> rows;
  for (int64_t params : sizes) {
    Contestants contestants(params, plan.isas);  // freed before the next size is allocated
    for (int threads : plan.threads) {
      const std::vector<Row> measured = measure(contestants, plan, params, threads);
      rows.insert(rows.end(), measured.begin(), measured.end());
      std::printf("  %s params, %d thread(s): done\n", params_label(params).c_str(), threads);
      std::fflush(stdout);
    }
  }
  const std::vector<TargetCheck> checks = evaluate_targets(rows, plan.isas.front());
  std::printf("\n");
  print_table(stdout, rows, plan);
  print_targets(stdout, checks, plan.isas.front());
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
