// The per-step constants (reciprocals included, each rounded once) and the driver that splits a
// shard across OpenMP threads for whichever kernel adam_isa.h chose.
#include "adam_kernel.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

namespace zt::hybrid_adam {

AdamConstants make_adam_constants(double lr, double beta1, double beta2, double eps,
                                  double weight_decay, bool adamw, int64_t step,
                                  double grad_divisor) {
  // As torch/csrc/api/src/optim/adam{,w}.cpp forms them, in double; the two divisions the
  // element update would repeat (by the gradient divisor and by sqrt(bias_correction2)) become
  // reciprocals, rounded once here.
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
  AdamConstants c;
  c.beta1 = static_cast<float>(beta1);
  c.one_minus_beta1 = static_cast<float>(1 - beta1);
  c.beta2 = static_cast<float>(beta2);
  c.one_minus_beta2 = static_cast<float>(1 - beta2);
  c.inv_sqrt_bias_correction2 = static_cast<float>(1 / std::sqrt(bias_correction2));
  c.eps = static_cast<float>(eps);
  c.neg_step_size = static_cast<float>(-(lr / bias_correction1));
  c.step = step;
  c.scale_grad = grad_divisor != 1;
  c.inv_grad_divisor = static_cast<float>(1 / grad_divisor);
  if (weight_decay == 0) {
    c.decay = DecayMode::kNone;
  } else if (adamw) {
    c.decay = DecayMode::kDecoupled;
    c.decay_factor = static_cast<float>(1 - lr * weight_decay);
  } else {
    c.decay = DecayMode::kL2;
    c.weight_decay = static_cast<float>(weight_decay);
  }
  return c;
}

namespace {

// Below this many elements per thread, waking a thread costs more than it saves (a part of
// 64K elements moves ~1.8 MB, tens of microseconds at memory speed).
constexpr int64_t kMinPerThread = int64_t{1} << 16;
// Parts start on multiples of this many elements: 256 B of fp32, whole cache lines for every
// buffer (128 B of a 16-bit copy or gradient), so no two threads write one line and only the
// last part has a vector tail.
constexpr int64_t kPartAlign = 64;

int64_t element_bytes(ElemType t) { return t == ElemType::kFloat32 ? 4 : 2; }

// `b` from its element `offset` on.
AdamBuffers from_element(const AdamBuffers& b, int64_t offset) {
  AdamBuffers out = b;
  out.param = static_cast<char*>(b.param) + offset * element_bytes(b.param_type);
  out.grad = static_cast<const char*>(b.grad) + offset * element_bytes(b.grad_type);
  out.exp_avg = static_cast<char*>(b.exp_avg) + offset * element_bytes(b.state_type);
  out.exp_avg_sq = static_cast<char*>(b.exp_avg_sq) + offset * element_bytes(b.state_type);
  if (b.copy_out)
    out.copy_out = static_cast<char*>(b.copy_out) + offset * element_bytes(b.copy_type);
  out.seed = b.seed + static_cast<uint64_t>(offset);
  out.numel = b.numel - offset;
  return out;
}

}  // namespace

void adam_update_cpu(const AdamBuffers& b, const AdamConstants& c, AdamRangeKernel kernel) {
  // The kernels hash an element's key seed + i as its low half plus a mix of the call's high
  // half: where seed + i carries into the high half inside the range, the rest is its own call,
  // so the bits stay a function of the 64-bit key (a group of more than 2^32 elements drew
  // other bits in memory than streamed in tiles, and repeated them 2^32 elements apart).
  const uint64_t to_carry = (uint64_t{1} << 32) - (b.seed & 0xFFFFFFFFu);
  if (static_cast<uint64_t>(b.numel) > to_carry) {
    AdamBuffers head = b;
    head.numel = static_cast<int64_t>(to_carry);
    adam_update_cpu(head, c, kernel);
    adam_update_cpu(from_element(b, static_cast<int64_t>(to_carry)), c, kernel);
    return;
  }
  const int64_t threads = std::max<int64_t>(
      1, std::min<int64_t>(omp_get_max_threads(), b.numel / kMinPerThread));
  if (threads == 1 || omp_in_parallel()) {
    kernel(b, c, 0, b.numel);
    return;
  }
  // One contiguous part per thread: each streams its own pages, and an element's arithmetic
  // does not depend on which part it falls in, so any thread count gives the same bits. The
  // split uses the team OpenMP actually started, which may be smaller than asked for.
#pragma omp parallel num_threads(static_cast <int>(threads))
  {
    const int64_t team = omp_get_num_threads();
    const int64_t share = (b.numel + team - 1) / team;
    const int64_t per_thread = (share + kPartAlign - 1) / kPartAlign * kPartAlign;
    const int64_t begin = std::min<int64_t>(b.numel, omp_get_thread_num() * per_thread);
    const int64_t end = std::min<int64_t>(b.numel, begin + per_thread);
    if (begin < end) kernel(b, c, begin, end);
  }
}

}  // namespace zt::hybrid_adam
