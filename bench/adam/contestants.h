// The contestants of zt_bench_adam over one size: optim_hybrid_adam loaded through the plugin
// catalog as the engine loads it, one optimizer per ISA (fp32 step, with a bf16 copy-out, and
// with bf16 moments), the roofline pass of each ISA over zt's own arrays, and
// torch::optim::AdamW on its own tensors. run() takes one timed sample of one of them: back-to-back
// steps for a given time. Thread safety: one thread drives it; the steps themselves use the OpenMP
// threads set by set_threads().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "zt/optimizer.h"

namespace zt::bench {

// Sets the thread count for every contestant: LibTorch's (at::set_num_threads) and OpenMP's,
// which are one libgomp pool here.
void set_threads(int threads);

struct Sample {
  double seconds = 0;
  int steps = 0;
};

class Contestants {
 public:
  // Allocates about 40 bytes per parameter for zt (p, g, m, v, a bf16 copy, bf16 m and v) and 16
  // for LibTorch.
  // `isas` are concrete and run here (isa.h).
  Contestants(int64_t params, const std::vector<std::string>& isas);

  // Back-to-back steps of `impl` (bench_adam.h) until min_s have passed (one step for 0): zt's
  // kernel or roofline pass of `isa`, or AdamW, which ignores `isa`.
  Sample run(const std::string& impl, const std::string& isa, double min_s);

 private:
  int64_t params_;
  torch::Tensor param_, grad_, exp_avg_, exp_avg_sq_, copy_;
  torch::Tensor exp_avg16_, exp_avg_sq16_;                // the bf16 moments of kZtBf16States
  std::map<std::string, std::unique_ptr<Optimizer>> zt_;  // by ISA
  std::map<std::string, std::unique_ptr<Optimizer>> zt_bf16_states_;  // by ISA, bf16 moments
  int64_t zt_steps_ = 0;  // shared: the optimizers take turns on one set of arrays
  torch::Tensor torch_param_;
  std::unique_ptr<torch::optim::AdamW> torch_;
};

}  // namespace zt::bench
