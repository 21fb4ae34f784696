// zt_bench_adam's shared vocabulary: the plan (sizes, thread counts, ISAs, repetitions), the
// contestants by name and one row of the result (a contestant on one ISA at a size and thread
// count). main.cc plans and interleaves the runs, contestants.cc times the steps of each,
// report.cc aggregates, prints and writes bench-results/adam.json.
// Thread safety: plain values.
#pragma once

#include "common/bench_util.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zt::bench {

// Bytes one Adam step moves per fp32 parameter: p, g, m, v read (16) and p, m, v written (12).
// The bf16 copy-out's extra 2 bytes are not counted, so its GB/s is comparable with the others'.
constexpr double kBytesPerParam = 28;
// Bytes one parameter keeps in memory across steps (p, g, m, v): a size's working set.
constexpr int64_t kStateBytesPerParam = 16;

// The contestants, in table order: the first three once per ISA (isa.h), AdamW once.
constexpr const char* kZt = "zt";                        // optim_hybrid_adam, fp32 step
constexpr const char* kZtBf16Copy = "zt_bf16_copy";      // the same, writing a bf16 copy too
constexpr const char* kZtBf16States = "zt_bf16_states";  // the fp32 step with bf16 moments
constexpr const char* kRoofline = "roofline";            // read p,g,m,v, write p,m,v (roofline.h)
constexpr const char* kTorchAdamW = "torch_adamw";       // torch::optim::AdamW, same process
constexpr const char* kIsaImpls[] = {kZt, kZtBf16Copy, kZtBf16States, kRoofline};
// Bytes a step with bf16 moments moves per parameter: p, g (8) and m, v (4) read, p (4) and
// m, v (4) written. Its GB/s counts these.
constexpr double kBf16StatesBytesPerParam = 20;

struct Plan {
  // Sizes in DRAM, where a step is bound by memory bandwidth.
  std::vector<int64_t> sizes = {10'000'000, 50'000'000};
  // A size in cache, where the kernel's arithmetic shows (0 = none). Its working set is 2 MiB,
  // 1 MiB a core at 2 threads (65536 parameters each, the least the kernel gives a thread): in L2
  // where a core has 2 MiB, partly in L3 where it has 1 MiB, far from DRAM either way. The
  // roofline pass shows which; zt's rate barely moves between 32K and 256K parameters.
  int64_t l2_params = 131'072;
  std::vector<int> threads = {1, 2};
  // Concrete ISAs (isa.h), each contestant but AdamW run on each; the first one's rows are the
  // targets'. Empty until main.cc resolves --isa.
  std::vector<std::string> isas;
  // Interleaved rounds (one sample of each contestant per round) per size and thread count,
  // after a warm-up round of one step each; medians are reported since bandwidth drifts on a
  // shared machine.
  int reps = 25;
  // A sample is back-to-back steps until this much time has passed (one step at DRAM sizes), so
  // a step of microseconds is not lost in the clock's and the interleaving's noise.
  double min_sample_s = 0.005;
  std::string json_path = "bench-results/adam.json";
};

// One contestant on one ISA at one size and thread count, over the rounds.
struct Row {
  std::string impl;
  std::string isa;  // kIsas' name, or kLibtorchIsa for AdamW
  int64_t params = 0;
  int threads = 0;
  int samples = 0;
  int steps_per_sample = 1;  // median
  double step_s = 0;         // median seconds per step
  double mparams_per_s() const { return params / step_s / 1e6; }
  double gbps() const {
    return params * (impl == kZtBf16States ? kBf16StatesBytesPerParam : kBytesPerParam) / step_s /
           1e9;
  }
};

}  // namespace zt::bench
