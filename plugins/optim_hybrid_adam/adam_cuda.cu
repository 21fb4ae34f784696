// optim_hybrid_adam's CUDA kernel and its launcher (see adam_cuda.h).
//
// Numerics: every step is written with an explicitly rounded intrinsic (__fmul_rn, __fadd_rn,
// __fdiv_rn, __fsqrt_rn, __fmaf_rn), so nvcc contracts nothing; the operations are
// adam_kernel.h's, fused exactly where it fuses, which makes a step on the GPU give the same bits
// as the host kernels. It is built without -use_fast_math: that implies -ftz=true, which would
// flush denormal moments (v of gradients near 1e-20) to zero where the host keeps them.
//
// Layout of one launch: the argument block lists up to kCudaAdamMaxSegments segments (a shard, or
// a piece of a long one) by their five pointers and length, and the prefix sums of their chunk
// counts. Block b updates chunk b - first_block[s] of the segment s whose range holds b.
// Segments start on multiples of kCudaAdamMaxSegmentNumel elements, a multiple of the vector
// width, so a segment's alignment is its shard's.
// Master parameters are fp32 only: bf16 masters (AdamBuffers::param_type) are refused by
// check_arguments and updated by the host kernels, so the kernel instances stay 27.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "adam_cuda.h"

namespace zt::hybrid_adam {

namespace {

constexpr int kThreads = 256;  // per block
constexpr int kVec = 4;        // elements per thread per vector step: 16 bytes of fp32
static_assert(kCudaAdamChunk % (kThreads * kVec) == 0, "a chunk is whole vector steps");
static_assert(kCudaAdamMaxSegmentNumel % kCudaAdamChunk == 0, "segments are whole chunks");
static_assert(kCudaAdamMaxSegmentNumel / kCudaAdamChunk * kCudaAdamMaxSegments < INT32_MAX,
              "block numbers of one launch fit an int");

// 16-bit storage types as raw bits (c10's types are host-only here).
struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};
// "No copy-out buffer".
struct NoCopy {};
// A bf16 moment rounded stochastically (a Bf16 moment is rounded to nearest even).
struct Bf16Stochastic {
  uint16_t bits;
};

// The argument block: by value, so it travels in the launch itself.
struct SegmentList {
  float* param[kCudaAdamMaxSegments];
  const void* grad[kCudaAdamMaxSegments];
  void* exp_avg[kCudaAdamMaxSegments];
  void* exp_avg_sq[kCudaAdamMaxSegments];
  void* copy_out[kCudaAdamMaxSegments];
  // Stochastic rounding: element i of segment s has key seed[s] + i and its shard's mix.
  uint32_t seed[kCudaAdamMaxSegments];
  uint32_t mix[kCudaAdamMaxSegments];
  int numel[kCudaAdamMaxSegments];
  int first_block[kCudaAdamMaxSegments + 1];  // first_block[count] = blocks of the launch
  int count;
};
// 4 KB is the kernel-parameter limit every CUDA driver and GPU accepts.
static_assert(sizeof(SegmentList) + sizeof(AdamConstants) <= 4096,
              "the argument block must fit CUDA's 4 KB kernel-parameter limit");

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(Bf16 x) {
  return __uint_as_float(static_cast<uint32_t>(x.bits) << 16);  // exact
}
__device__ __forceinline__ float widen(F16 x) {
  return __half2float(__ushort_as_half(x.bits));  // exact
}
__device__ __forceinline__ float widen(Bf16Stochastic x) { return widen(Bf16{x.bits}); }

// c10::BFloat16's round_to_nearest_even; NaN becomes 0x7FC0.
__device__ __forceinline__ Bf16 narrow(Bf16*, float x) {
  if (isnan(x)) return Bf16{0x7FC0};
  const uint32_t u = __float_as_uint(x);
  return Bf16{static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16)};
}
// The hardware rounds to nearest even like c10::Half; NaN becomes c10's sign | 0x7E00 (the
// hardware would give a canonical NaN).
__device__ __forceinline__ F16 narrow(F16*, float x) {
  if (isnan(x)) {
    return F16{static_cast<uint16_t>(((__float_as_uint(x) >> 16) & 0x8000u) | 0x7E00u)};
  }
  return F16{__half_as_ushort(__float2half_rn(x))};
}

// One element, as adam_simd.h's update_vector computes each lane.
__device__ __forceinline__ void update_element(float& p, float grad, float& m, float& v,
                                               const AdamConstants& c) {
  float g = c.scale_grad ? __fmul_rn(grad, c.inv_grad_divisor) : grad;
  if (c.decay == DecayMode::kDecoupled) {
    p = __fmul_rn(p, c.decay_factor);
  } else if (c.decay == DecayMode::kL2) {
    g = __fmaf_rn(p, c.weight_decay, g);
  }
  m = __fmaf_rn(g, c.one_minus_beta1, __fmul_rn(m, c.beta1));
  v = __fmaf_rn(__fmul_rn(c.one_minus_beta2, g), g, __fmul_rn(v, c.beta2));
  const float denom = __fmaf_rn(__fsqrt_rn(v), c.inv_sqrt_bias_correction2, c.eps);
  p = __fadd_rn(p, __fdiv_rn(__fmul_rn(c.neg_step_size, m), denom));
}

// A moment into its storage; `random` is 16 stochastic bits (Bf16Stochastic only): added below
// the kept bits, they carry with probability equal to the dropped fraction. NaN is 0x7FC0.
__device__ __forceinline__ void store_state(float* out, int i, float x, uint32_t) { out[i] = x; }
__device__ __forceinline__ void store_state(Bf16* out, int i, float x, uint32_t) {
  out[i] = narrow(out, x);
}
__device__ __forceinline__ void store_state(Bf16Stochastic* out, int i, float x, uint32_t random) {
  out[i].bits = isnan(x) ? uint16_t{0x7FC0}
                         : static_cast<uint16_t>((__float_as_uint(x) + random) >> 16);
}

// Both moments of element i, with element i's stochastic bits (low half: exp_avg).
template <class S>
__device__ __forceinline__ void store_states(S* exp_avg, S* exp_avg_sq, int i, float m, float v,
                                             uint32_t seed, uint32_t mix) {
  uint32_t random = 0;
  if constexpr (std::is_same_v<S, Bf16Stochastic>) {
    random = fmix32((seed + static_cast<uint32_t>(i)) ^ mix);
  }
  store_state(exp_avg, i, m, random & 0xFFFFu);
  store_state(exp_avg_sq, i, v, random >> 16);
}

template <class C>
__device__ __forceinline__ void store_copy(C* out, int i, float p) {
  if constexpr (!std::is_same_v<C, NoCopy>) out[i] = narrow(out, p);
}

// kVec consecutive 16-bit values: one 8-byte access.
struct alignas(8) Half4 {
  uint16_t bits[kVec];
};

template <class G>
__device__ __forceinline__ void load_grad4(const G* grad, int i, float (&g)[kVec]) {
  if constexpr (std::is_same_v<G, float>) {
    const float4 x = *reinterpret_cast<const float4*>(grad + i);
    g[0] = x.x, g[1] = x.y, g[2] = x.z, g[3] = x.w;
  } else {
    const Half4 x = *reinterpret_cast<const Half4*>(grad + i);
    for (int k = 0; k < kVec; ++k) g[k] = widen(G{x.bits[k]});
  }
}

template <class C>
__device__ __forceinline__ void store_copy4(C* out, int i, const float4& p) {
  if constexpr (!std::is_same_v<C, NoCopy>) {
    Half4 h;
    h.bits[0] = narrow(out, p.x).bits;
    h.bits[1] = narrow(out, p.y).bits;
    h.bits[2] = narrow(out, p.z).bits;
    h.bits[3] = narrow(out, p.w).bits;
    *reinterpret_cast<Half4*>(out + i) = h;
  }
}

template <class T>
__device__ __forceinline__ bool aligned_for_vec(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (kVec * sizeof(T)) == 0;
}

template <class G, class C, class S>
__global__ void __launch_bounds__(kThreads)
    adam_multi_tensor(const SegmentList list, const AdamConstants c) {
  // The segment whose blocks [first_block[s], first_block[s + 1]) hold this block. The list
  // sits in the constant bank and every thread reads the same entries: a broadcast.
  const int block = static_cast<int>(blockIdx.x);
  int lo = 0;
  int hi = list.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (list.first_block[mid] <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int s = lo;
  float* const param = list.param[s];
  const G* const grad = static_cast<const G*>(list.grad[s]);
  S* const exp_avg = static_cast<S*>(list.exp_avg[s]);
  S* const exp_avg_sq = static_cast<S*>(list.exp_avg_sq[s]);
  C* const copy_out = static_cast<C*>(list.copy_out[s]);
  const uint32_t seed = list.seed[s], mix = list.mix[s];
  const int begin = (block - list.first_block[s]) * static_cast<int>(kCudaAdamChunk);
  const int end = min(begin + static_cast<int>(kCudaAdamChunk), list.numel[s]);

  int scalar_begin = begin;
  bool vec = aligned_for_vec(param) && aligned_for_vec(grad) && aligned_for_vec(exp_avg) &&
             aligned_for_vec(exp_avg_sq);
  if constexpr (!std::is_same_v<C, NoCopy>) vec = vec && aligned_for_vec(copy_out);
  // bf16 moments take the element loop below (the same arithmetic).
  if (std::is_same_v<S, float> && vec) {
    // Whole vectors; begin is a multiple of kVec, so every access is aligned.
    const int vec_end = begin + (end - begin) / kVec * kVec;
    for (int i = begin + static_cast<int>(threadIdx.x) * kVec; i < vec_end; i += kThreads * kVec) {
      float4 p = *reinterpret_cast<const float4*>(param + i);
      float4 m = *reinterpret_cast<const float4*>(exp_avg + i);  // S is float here
      float4 v = *reinterpret_cast<const float4*>(exp_avg_sq + i);
      float g[kVec];
      load_grad4(grad, i, g);
      update_element(p.x, g[0], m.x, v.x, c);
      update_element(p.y, g[1], m.y, v.y, c);
      update_element(p.z, g[2], m.z, v.z, c);
      update_element(p.w, g[3], m.w, v.w, c);
      *reinterpret_cast<float4*>(exp_avg + i) = m;
      *reinterpret_cast<float4*>(exp_avg_sq + i) = v;
      *reinterpret_cast<float4*>(param + i) = p;
      store_copy4(copy_out, i, p);
    }
    scalar_begin = vec_end;
  }
  // Misaligned segments, and the last < kVec elements of an aligned one.
  for (int i = scalar_begin + static_cast<int>(threadIdx.x); i < end; i += kThreads) {
    float p = param[i];
    float m = widen(exp_avg[i]);
    float v = widen(exp_avg_sq[i]);
    update_element(p, widen(grad[i]), m, v, c);
    store_states(exp_avg, exp_avg_sq, i, m, v, seed, mix);
    param[i] = p;
    store_copy(copy_out, i, p);
  }
}

// Element size of a gradient or copy-out type.
size_t elem_size(ElemType t) { return t == ElemType::kFloat32 ? 4 : 2; }

// Which kernel instance a shard's moments need: 0 fp32, 1 bf16 to nearest, 2 bf16 stochastic.
int state_key(const AdamBuffers& b) {
  if (b.state_type == ElemType::kFloat32) return 0;
  return b.state_rounding == StateRounding::kNearest ? 1 : 2;
}

// Packs the segments of every shard of one (gradient type, copy-out type, state key) group into
// argument blocks and launches them.
template <class G, class C, class S>
void launch_group(const AdamBuffers* shards, size_t count, ElemType grad_type, int copy_key,
                  int states, const AdamConstants& constants, cudaStream_t stream,
                  const CudaAdamLimits& limits, CudaAdamStatus& status) {
  SegmentList list{};
  auto flush = [&]() {
    if (list.count == 0) return;
    const int blocks = list.first_block[list.count];
    adam_multi_tensor<G, C, S><<<blocks, kThreads, 0, stream>>>(list, constants);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      status.cuda_error = static_cast<int>(err);
      status.what = cudaGetErrorString(err);
    } else {
      ++status.launches;
    }
    list.count = 0;
  };
  const size_t state_size = states == 0 ? 4 : 2;
  for (size_t k = 0; k < count && status.ok(); ++k) {
    const AdamBuffers& b = shards[k];
    const int key = b.copy_out == nullptr ? 0 : static_cast<int>(b.copy_type) + 1;
    if (b.numel == 0 || b.grad_type != grad_type || key != copy_key || state_key(b) != states) {
      continue;
    }
    for (int64_t offset = 0, n = 0; offset < b.numel && status.ok(); offset += n) {
      n = b.numel - offset < limits.max_segment_numel ? b.numel - offset : limits.max_segment_numel;
      // A segment ends where seed + i carries into the high half, whose mix it takes, as
      // adam_update_cpu splits its range: the bits are a function of the 64-bit key.
      const uint64_t first_key = b.seed + static_cast<uint64_t>(offset);
      const uint64_t to_carry = (uint64_t{1} << 32) - (first_key & 0xFFFFFFFFu);
      if (static_cast<uint64_t>(n) > to_carry) n = static_cast<int64_t>(to_carry);
      const uint32_t mix = stochastic_mix(first_key, constants.step);
      const int i = list.count;
      list.param[i] = static_cast<float*>(b.param) + offset;
      list.grad[i] = static_cast<const char*>(b.grad) + offset * elem_size(b.grad_type);
      list.exp_avg[i] = static_cast<char*>(b.exp_avg) + offset * state_size;
      list.exp_avg_sq[i] = static_cast<char*>(b.exp_avg_sq) + offset * state_size;
      list.copy_out[i] = b.copy_out == nullptr
                             ? nullptr
                             : static_cast<char*>(b.copy_out) + offset * elem_size(b.copy_type);
      list.seed[i] = static_cast<uint32_t>(first_key);
      list.mix[i] = mix;
      list.numel[i] = static_cast<int>(n);
      if (i == 0) list.first_block[0] = 0;
      list.first_block[i + 1] = list.first_block[i] +
                                static_cast<int>((n + kCudaAdamChunk - 1) / kCudaAdamChunk);
      list.count = i + 1;
      if (list.count == limits.max_segments) flush();
    }
  }
  if (status.ok()) flush();
}

template <class G, class C>
void launch_state_types(const AdamBuffers* shards, size_t count, ElemType grad_type, int copy_key,
                        const AdamConstants& constants, cudaStream_t stream,
                        const CudaAdamLimits& limits, CudaAdamStatus& status) {
  launch_group<G, C, float>(shards, count, grad_type, copy_key, 0, constants, stream, limits,
                            status);
  if (!status.ok()) return;
  launch_group<G, C, Bf16>(shards, count, grad_type, copy_key, 1, constants, stream, limits,
                           status);
  if (!status.ok()) return;
  launch_group<G, C, Bf16Stochastic>(shards, count, grad_type, copy_key, 2, constants, stream,
                                     limits, status);
}

template <class G>
void launch_grad_type(const AdamBuffers* shards, size_t count, ElemType grad_type,
                      const AdamConstants& constants, cudaStream_t stream,
                      const CudaAdamLimits& limits, CudaAdamStatus& status) {
  // copy key: 0 = none, else copy_type + 1 (only bf16 and fp16 pass validation).
  launch_state_types<G, NoCopy>(shards, count, grad_type, 0, constants, stream, limits, status);
  if (!status.ok()) return;
  launch_state_types<G, Bf16>(shards, count, grad_type, static_cast<int>(ElemType::kBFloat16) + 1,
                              constants, stream, limits, status);
  if (!status.ok()) return;
  launch_state_types<G, F16>(shards, count, grad_type, static_cast<int>(ElemType::kFloat16) + 1,
                             constants, stream, limits, status);
}

// nullptr when every shard and the limits can be launched; else what is wrong.
const char* check_arguments(const AdamBuffers* shards, size_t count, const CudaAdamLimits& limits) {
  if (limits.max_segments < 1 || limits.max_segments > kCudaAdamMaxSegments) {
    return "CudaAdamLimits::max_segments must be in 1..kCudaAdamMaxSegments";
  }
  if (limits.max_segment_numel <= 0 || limits.max_segment_numel % kCudaAdamChunk != 0 ||
      limits.max_segment_numel > kCudaAdamMaxSegmentNumel) {
    return "CudaAdamLimits::max_segment_numel must be a positive multiple of kCudaAdamChunk, "
           "at most kCudaAdamMaxSegmentNumel";
  }
  if (count > 0 && shards == nullptr) return "shards is null but count is not 0";
  for (size_t k = 0; k < count; ++k) {
    const AdamBuffers& b = shards[k];
    if (b.numel < 0) return "a shard has a negative numel";
    if (b.param_type != ElemType::kFloat32) {
      return "bf16 master parameters are not supported by the CUDA kernel (it updates fp32 "
             "masters only; bf16 masters are updated on host shards)";
    }
    if (b.numel == 0) continue;
    if (b.param == nullptr || b.grad == nullptr || b.exp_avg == nullptr ||
        b.exp_avg_sq == nullptr) {
      return "a shard has a null param, grad, exp_avg or exp_avg_sq";
    }
    if (b.copy_out != nullptr && b.copy_type == ElemType::kFloat32) {
      return "an fp32 copy_out is not supported by the CUDA kernel (bf16 or fp16 only)";
    }
    // A GPU faults on an element that is not aligned to its size (cudaErrorMisalignedAddress),
    // and the fault is sticky: it would poison the whole CUDA context, so refuse it here.
    const auto on = [](const void* p, size_t bytes) {
      return reinterpret_cast<uintptr_t>(p) % bytes == 0;
    };
    if (b.state_type == ElemType::kFloat16) {
      return "fp16 moments are not supported (fp32 or bf16 only)";
    }
    const size_t state_size = elem_size(b.state_type);
    if (!on(b.param, 4) || !on(b.exp_avg, state_size) || !on(b.exp_avg_sq, state_size) ||
        !on(b.grad, elem_size(b.grad_type)) ||
        (b.copy_out != nullptr && !on(b.copy_out, elem_size(b.copy_type)))) {
      return "a shard's buffer is not aligned to its element size";
    }
  }
  return nullptr;
}

}  // namespace

CudaAdamStatus adam_update_cuda(const AdamBuffers* shards, size_t count,
                                const AdamConstants& constants, void* stream,
                                const CudaAdamLimits& limits) {
  CudaAdamStatus status;
  status.what = check_arguments(shards, count, limits);
  if (!status.ok()) return status;
  const auto s = static_cast<cudaStream_t>(stream);
  launch_grad_type<float>(shards, count, ElemType::kFloat32, constants, s, limits, status);
  if (status.ok()) {
    launch_grad_type<Bf16>(shards, count, ElemType::kBFloat16, constants, s, limits, status);
  }
  if (status.ok()) {
    launch_grad_type<F16>(shards, count, ElemType::kFloat16, constants, s, limits, status);
  }
  return status;
}

}  // namespace zt::hybrid_adam
