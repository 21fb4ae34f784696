// The four contestants of zt_bench_adam over one size: optim_hybrid_adam loaded through the
// plugin catalog as the engine loads it (fp32 step, and with a bf16 copy-out),
// torch::optim::AdamW on its own tensors, and the memory roofline pass over zt's own arrays.
// Each step() call times exactly one step.
// Thread safety: one thread drives it; the steps themselves use the OpenMP threads set by
// set_threads().
#pragma once

#include <cstdint>
#include <memory>

#include <torch/torch.h>

#include "zt/optimizer.h"

namespace zt::bench {

// Sets the thread count for every contestant: LibTorch's (at::set_num_threads) and OpenMP's,
// which are one libgomp pool here.
void set_threads(int threads);

class Contestants {
 public:
  // Allocates about 36 bytes per parameter for zt (p, g, m, v, a bf16 copy) and 16 for LibTorch.
  explicit Contestants(int64_t params);

  double step_zt(bool bf16_copy);  // seconds of one optim_hybrid_adam step
  double step_torch_adamw();       // seconds of one torch::optim::AdamW step
  double step_roofline();          // seconds of one roofline pass over zt's arrays
  // Seconds of one step of the named contestant (kImpls).
  double step(const char* impl);

 private:
  int64_t params_;
  torch::Tensor param_, grad_, exp_avg_, exp_avg_sq_, copy_;
  std::unique_ptr<Optimizer> zt_;
  int64_t zt_steps_ = 0;
  torch::Tensor torch_param_;
  std::unique_ptr<torch::optim::AdamW> torch_;
};

}  // namespace zt::bench
