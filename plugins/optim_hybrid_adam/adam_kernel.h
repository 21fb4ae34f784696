// The Adam/AdamW element update of optim_hybrid_adam on host memory: one pass over a shard's
// parameters, gradient, both moments and (optionally) a 16-bit copy of the new parameters.
// Master parameters and moments may be kept in bf16 to save memory and traffic; they are widened
// exactly and rounded once when stored, so the fp32 arithmetic below is the same for every
// storage type and a 16-bit step differs from the fp32 one only by those roundings.
// The constants are prepared once per step, reciprocals included, so an element costs one
// square root and one division (LibTorch's fp32 Adam divides three times); every kernel
// (portable, AVX2, AVX-512, CUDA) does the same operations in the same order and gives the same
// bits. Against a double-precision reference the result stays within the bound the tests state
// (about 17 fp32 ulps relative where nothing cancels; tests/adam_test_support.h).
// adam_update_cpu splits a shard across OpenMP threads and runs the chosen kernel on each part.
// Thread safety: adam_update_cpu touches only the buffers it is given; disjoint buffers may be
// updated from several threads at once.
#pragma once

#include <cstdint>

// The stochastic-rounding hash runs in host kernels and in the CUDA kernel alike.
#if defined(__CUDACC__)
#define ZT_ADAM_HOST_DEVICE __host__ __device__
#else
#define ZT_ADAM_HOST_DEVICE
#endif

namespace zt::hybrid_adam {

// How weight decay enters the update.
enum class DecayMode {
  kNone,       // weight_decay == 0: LibTorch skips the decay entirely (so inf/NaN params stay)
  kDecoupled,  // AdamW: p *= 1 - lr * wd before the moment update
  kL2          // Adam: g += wd * p before the moment update
};

// Element types a kernel reads gradients from / writes the parameter copy to.
enum class ElemType { kFloat32, kBFloat16, kFloat16 };

// How a value kept in bf16 (a moment, or a master parameter) is rounded after the fp32 update.
enum class StateRounding {
  kNearest,    // to nearest even, as c10::BFloat16 (and Tensor::to) rounds
  kStochastic  // up with probability equal to the dropped fraction: unbiased on average, so
               // small updates to a large value are not always lost (see stochastic_bits)
};

// Stochastic rounding's random bits for element `index` of a buffer whose element 0 has key
// `seed`, at `step`: a counter-based hash (murmur3's 32-bit finaliser over the index mixed with
// the step), so every kernel, thread split and resume draws the same bits for the same element
// and step, and no generator state is kept. exp_avg takes the low 16 bits, exp_avg_sq the high;
// a bf16 master parameter takes param_stochastic_bits of the same 32 bits.
ZT_ADAM_HOST_DEVICE constexpr uint32_t fmix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}
// The per-call part of the hash: the step and the seed's high half.
constexpr uint32_t stochastic_mix(uint64_t seed, int64_t step) {
  return fmix32(static_cast<uint32_t>(step) * 0x9E3779B9u ^
                fmix32(static_cast<uint32_t>(seed >> 32) + 0x7F4A7C15u));
}
ZT_ADAM_HOST_DEVICE constexpr uint32_t stochastic_bits(uint64_t seed, uint32_t mix, int64_t index) {
  return fmix32((static_cast<uint32_t>(seed) + static_cast<uint32_t>(index)) ^ mix);
}
// A bf16 master parameter's 16 random bits, from its element's stochastic_bits: one more round
// of the finaliser over them xor a constant, top 16 bits. The moments use all 32 bits of
// `element_bits` already; re-mixing them gives bits that do not follow theirs (no correlation
// between the direction a moment and its parameter round), at the cost of one hash, not two.
inline constexpr uint32_t kParamBitsSalt = 0x5BD1E995u;
ZT_ADAM_HOST_DEVICE constexpr uint32_t param_stochastic_bits(uint32_t element_bits) {
  return fmix32(element_bits ^ kParamBitsSalt) >> 16;
}

// The per-step scalars, formed in double and rounded once to float, so the kernel never sees a
// double. The element update (every kernel, in this order; fma = one rounding):
//   g = scale_grad ? grad * inv_grad_divisor : grad
//   p = p * decay_factor (kDecoupled)  |  g = fma(p, weight_decay, g) (kL2)
//   m = fma(g, one_minus_beta1, m * beta1)
//   v = fma(one_minus_beta2 * g, g, v * beta2)
//   denom = fma(sqrt(v), inv_sqrt_bias_correction2, eps)
//   p = p + (neg_step_size * m) / denom
struct AdamConstants {
  float beta1 = 0.9f;
  float one_minus_beta1 = 0.1f;
  float beta2 = 0.999f;
  float one_minus_beta2 = 0.001f;
  float inv_sqrt_bias_correction2 = 1;  // 1 / sqrt(1 - beta2^step)
  float eps = 1e-8f;
  float neg_step_size = -1e-3f;  // -(lr / (1 - beta1^step))
  bool scale_grad = false;       // the gradient divisor is not 1 (loss scale, accumulation)
  float inv_grad_divisor = 1;    // 1 / grad_divisor
  DecayMode decay = DecayMode::kNone;
  float decay_factor = 1;  // kDecoupled: 1 - lr * wd
  float weight_decay = 0;  // kL2: wd
  int64_t step = 1;        // stochastic rounding's bits depend on it
};

// The step's hyperparameters as AdamConstants (double arithmetic, each field rounded once).
// `step` is 1-based; `adamw` picks kDecoupled over kL2 when weight_decay != 0.
AdamConstants make_adam_constants(double lr, double beta1, double beta2, double eps,
                                  double weight_decay, bool adamw, int64_t step,
                                  double grad_divisor);

// One shard's buffers, all `numel` elements long, contiguous, on the host.
// Moments and master parameters in bf16 are widened exactly, updated in fp32 like fp32 ones and
// rounded once when stored (state_rounding, param_rounding), so a bf16 step differs from the
// fp32 step only by those roundings. A bf16 master is its own 16-bit copy: copy_out must then be
// nullptr (the kernels ignore it).
struct AdamBuffers {
  void* param = nullptr;                     // in/out: master parameters, of type param_type
  ElemType param_type = ElemType::kFloat32;  // kFloat32 or kBFloat16
  StateRounding param_rounding = StateRounding::kNearest;  // bf16 masters only
  const void* grad = nullptr;                              // in: gradient of type grad_type
  ElemType grad_type = ElemType::kFloat32;
  void* exp_avg = nullptr;                   // in/out: first moment, of type state_type
  void* exp_avg_sq = nullptr;                // in/out: second moment, of type state_type
  ElemType state_type = ElemType::kFloat32;  // kFloat32 or kBFloat16
  StateRounding state_rounding = StateRounding::kNearest;  // bf16 states only
  uint64_t seed = 0;         // stochastic rounding: element i's key is seed + i (all 64 bits)
  void* copy_out = nullptr;  // out, optional (nullptr = none): new params as copy_type
  ElemType copy_type = ElemType::kBFloat16;
  int64_t numel = 0;
};

// A kernel: the update of elements [begin, end) of `buffers`, on one thread. Every kernel does
// the same operations in the same order (AdamConstants); they differ only in vector width.
using AdamRangeKernel = void (*)(const AdamBuffers& buffers, const AdamConstants& constants,
                                 int64_t begin, int64_t end);

// Applies one Adam/AdamW step to every element, reading and writing each buffer once, with
// `kernel` on up to omp_get_max_threads() threads (at::set_num_threads sets it too). Each
// thread takes one contiguous part, so the result does not depend on the thread count.
void adam_update_cpu(const AdamBuffers& buffers, const AdamConstants& constants,
                     AdamRangeKernel kernel);

}  // namespace zt::hybrid_adam
