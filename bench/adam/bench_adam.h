// zt_bench_adam's shared vocabulary: the plan (sizes, thread counts, repetitions), the four
// contestants by name and one row of the result (a contestant at a size and thread count).
// main.cc plans and interleaves the runs, contestants.cc times one step of each, report.cc
// aggregates, prints and writes bench-results/adam.json.
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

// The contestants, in table order.
constexpr const char* kZt = "zt";                    // optim_hybrid_adam, fp32 step
constexpr const char* kZtBf16Copy = "zt_bf16_copy";  // the same, writing a bf16 copy too
constexpr const char* kTorchAdamW = "torch_adamw";   // torch::optim::AdamW, same process
constexpr const char* kRoofline = "roofline";        // read p,g,m,v, write p,m,v: memory's limit
constexpr const char* kImpls[] = {kZt, kZtBf16Copy, kTorchAdamW, kRoofline};

struct Plan {
  std::vector<int64_t> sizes = {10'000'000, 50'000'000};
  std::vector<int> threads = {1, 2};
  // Interleaved rounds (one step of each contestant per round) per size and thread count, after
  // one warm-up round; medians are reported since bandwidth drifts on a shared machine.
  int reps = 25;
  std::string json_path = "bench-results/adam.json";
};

// One contestant at one size and thread count, over the rounds.
struct Row {
  std::string impl;
  int64_t params = 0;
  int threads = 0;
  int samples = 0;
  double step_s = 0;  // median seconds per step
  double mparams_per_s() const { return params / step_s / 1e6; }
  double gbps() const { return params * kBytesPerParam / step_s / 1e9; }
};

}  // namespace zt::bench
