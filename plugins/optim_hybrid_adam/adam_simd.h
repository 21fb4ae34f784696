// The Adam/AdamW update written once over a vector ISA `V` and instantiated by adam_avx2.cc and
// adam_avx512.cc, each compiled with its own -m flags. V is a struct with internal linkage in
// its file, providing kWidth lanes and:
//   Vec set1(float); Vec load(const float*); void store(float*, Vec);
//   Vec load(const Bf16*) / load(const F16*)    widen kWidth 16-bit values exactly;
//   Half narrow(const Bf16*, Vec) / (const F16*, Vec)   round to nearest even as c10 does
//                                               (NaN too), giving kWidth 16-bit values;
//   store_half(void*, Half); stream_half(void*, Half) (non-temporal, kWidth*2-byte aligned);
//   fence() (orders the non-temporal stores before what follows);
//   add, mul, div, sqrt (IEEE, correctly rounded) and fmadd(a, b, c) = a*b + c rounded once;
//   for stochastic rounding of bf16 moments and masters, kWidth uint32 lanes IVec with iset1,
//   lanes() (0, 1, ..., kWidth - 1), iadd, ixor, iand, imul (low 32 bits), srl<n>, and Half
//   narrow_biased(Vec x, IVec bias): the top 16 bits of x's bits + bias, NaN as 0x7FC0.
// Numerics: the operations of adam_kernel.h's AdamConstants in that order, the same in every
// kernel (the portable one uses std::fma where these fuse), so all of them give the same bits;
// the files are built with -ffp-contract=off so the compiler fuses nothing else.
// Master parameters and moments share one storage vocabulary (fp32, Bf16, Bf16Stochastic), so a
// bf16 master is widened and rounded by the same functions as a bf16 moment; its stochastic bits
// are param_stochastic_bits of the moments' (adam_kernel.h), computed the same way per lane.
// Tails shorter than kWidth go through small zero-filled stack buffers of each buffer's storage
// type, so they get exactly the vector arithmetic of the body and no load or store leaves the
// shard.
// The 16-bit copy-out is written with non-temporal stores where aligned: it is only written, so
// ordinary stores would first read every line of it (2 more bytes per parameter, on top of the
// 28 the step moves); the copy is read again only by the next forward pass, long after.
// Thread safety: touches only [begin, end) of the buffers it is given.
#pragma once

#include <cstdint>
#include <type_traits>

#include "adam_kernel.h"

namespace zt::hybrid_adam::simd {
// Everything here has internal linkage: each ISA file gets its own copy, compiled with its own
// flags, and the linker can never merge an AVX-512 body into the AVX2 file's callers.
namespace {

// 16-bit storage types, as raw bits: the SIMD files do not include c10.
struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};
// "No copy-out buffer".
struct NoCopy {};
// A bf16 moment or master rounded stochastically (a Bf16 is rounded to nearest even).
struct Bf16Stochastic {
  uint16_t bits;
};

// The step's scalars broadcast once per call.
template <class V>
struct Consts {
  using Vec = typename V::Vec;
  Vec inv_divisor, decay_factor, weight_decay, beta1, one_minus_beta1, beta2, one_minus_beta2,
      inv_sqrt_bc2, eps, neg_step_size;
  bool scale_grad;
  DecayMode decay;
  uint32_t seed;                // stochastic rounding: the low half of AdamBuffers::seed
  typename V::IVec mix, low16;  // stochastic_mix of the call; 0xFFFF
  typename V::IVec param_salt;  // kParamBitsSalt

  Consts(const AdamConstants& c, uint64_t buffer_seed)
      : inv_divisor(V::set1(c.inv_grad_divisor)),
        decay_factor(V::set1(c.decay_factor)),
        weight_decay(V::set1(c.weight_decay)),
        beta1(V::set1(c.beta1)),
        one_minus_beta1(V::set1(c.one_minus_beta1)),
        beta2(V::set1(c.beta2)),
        one_minus_beta2(V::set1(c.one_minus_beta2)),
        inv_sqrt_bc2(V::set1(c.inv_sqrt_bias_correction2)),
        eps(V::set1(c.eps)),
        neg_step_size(V::set1(c.neg_step_size)),
        scale_grad(c.scale_grad),
        decay(c.decay),
        seed(static_cast<uint32_t>(buffer_seed)),
        mix(V::iset1(stochastic_mix(buffer_seed, c.step))),
        low16(V::iset1(0xFFFFu)),
        param_salt(V::iset1(kParamBitsSalt)) {}
};

// fmix32 of adam_kernel.h on every lane.
template <class V>
inline typename V::IVec fmix(typename V::IVec x) {
  x = V::ixor(x, V::template srl<16>(x));
  x = V::imul(x, V::iset1(0x85EBCA6Bu));
  x = V::ixor(x, V::template srl<13>(x));
  x = V::imul(x, V::iset1(0xC2B2AE35u));
  return V::ixor(x, V::template srl<16>(x));
}

template <class T>
constexpr bool kStochastic = std::is_same_v<T, Bf16Stochastic>;

// kWidth values (moments or masters) in storage type S, widened exactly.
template <class V, class S>
inline typename V::Vec widen(const S* p) {
  if constexpr (std::is_same_v<S, float>) {
    return V::load(p);
  } else {
    return V::load(reinterpret_cast<const Bf16*>(p));
  }
}

// kWidth values into storage type S; `bias` is 16 stochastic bits per lane (Bf16Stochastic only).
template <class V, class S>
inline void store_rounded(S* out, typename V::Vec x, typename V::IVec bias) {
  if constexpr (std::is_same_v<S, float>) {
    V::store(out, x);
  } else if constexpr (std::is_same_v<S, Bf16>) {
    V::store_half(out, V::narrow(out, x));
  } else {
    V::store_half(out, V::narrow_biased(x, bias));
  }
}

// copy_out + i, without arithmetic on the null pointer that stands for "no copy".
template <class C>
inline C* offset(C* p, int64_t i) {
  return p + i;
}
inline NoCopy* offset(NoCopy*, int64_t) { return nullptr; }

// The new parameters into the copy-out, if any (kStream: non-temporal, aligned).
template <bool kStream, class V, class C>
inline void store_copy(C* out, typename V::Vec p) {
  if constexpr (std::is_same_v<C, float>) {
    V::store(out, p);
  } else if constexpr (!std::is_same_v<C, NoCopy>) {
    const typename V::Half h = V::narrow(out, p);
    if constexpr (kStream) {
      V::stream_half(out, h);
    } else {
      V::store_half(out, h);
    }
  }
}

// kWidth elements starting at the given pointers, the first of them element `index` of the
// buffer (it keys stochastic rounding). G: gradient, C: copy-out, S: moments, P: masters.
template <bool kStream, class V, class G, class C, class S, class P>
inline void update_vector(P* param, const G* grad, S* exp_avg, S* exp_avg_sq, C* copy_out,
                          int64_t index, const Consts<V>& k) {
  using Vec = typename V::Vec;
  Vec g = V::load(grad);
  if (k.scale_grad) g = V::mul(g, k.inv_divisor);
  Vec p = widen<V>(param);
  if (k.decay == DecayMode::kDecoupled) {
    p = V::mul(p, k.decay_factor);
  } else if (k.decay == DecayMode::kL2) {
    g = V::fmadd(p, k.weight_decay, g);
  }
  const Vec m = V::fmadd(g, k.one_minus_beta1, V::mul(widen<V>(exp_avg), k.beta1));
  const Vec v = V::fmadd(V::mul(k.one_minus_beta2, g), g, V::mul(widen<V>(exp_avg_sq), k.beta2));
  const Vec denom = V::fmadd(V::sqrt(v), k.inv_sqrt_bc2, k.eps);
  p = V::add(p, V::div(V::mul(k.neg_step_size, m), denom));
  typename V::IVec bits{};
  if constexpr (kStochastic<S> || kStochastic<P>) {
    const uint32_t first = k.seed + static_cast<uint32_t>(index);
    bits = fmix<V>(V::ixor(V::iadd(V::iset1(first), V::lanes()), k.mix));
  }
  store_rounded<V>(exp_avg, m, V::iand(bits, k.low16));
  store_rounded<V>(exp_avg_sq, v, V::template srl<16>(bits));
  typename V::IVec param_bits{};
  if constexpr (kStochastic<P>) {
    param_bits = V::template srl<16>(fmix<V>(V::ixor(bits, k.param_salt)));
  }
  store_rounded<V>(param, p, param_bits);
  store_copy<kStream, V>(copy_out, p);
}

// The last n < kWidth elements: copied into zero-filled buffers, updated as a full vector
// (zero lanes give m = v = 0, denom = eps, no exceptions that matter) and copied back.
template <class V, class G, class C, class S, class P>
void update_tail(P* param, const G* grad, S* exp_avg, S* exp_avg_sq, C* copy_out, int64_t n,
                 int64_t index, const Consts<V>& k) {
  P p[V::kWidth] = {};
  S m[V::kWidth] = {}, v[V::kWidth] = {};
  G g[V::kWidth] = {};
  C out[V::kWidth] = {};
  for (int64_t i = 0; i < n; ++i) {
    p[i] = param[i];
    g[i] = grad[i];
    m[i] = exp_avg[i];
    v[i] = exp_avg_sq[i];
  }
  update_vector<false, V>(p, g, m, v, out, index, k);
  for (int64_t i = 0; i < n; ++i) {
    param[i] = p[i];
    exp_avg[i] = m[i];
    exp_avg_sq[i] = v[i];
  }
  if constexpr (!std::is_same_v<C, NoCopy>) {
    for (int64_t i = 0; i < n; ++i) copy_out[i] = out[i];
  }
}

template <bool kStream, class V, class G, class C, class S, class P>
void update_body(const AdamBuffers& b, const Consts<V>& k, int64_t begin, int64_t end) {
  P* param = static_cast<P*>(b.param);
  const G* grad = static_cast<const G*>(b.grad);
  S* exp_avg = static_cast<S*>(b.exp_avg);
  S* exp_avg_sq = static_cast<S*>(b.exp_avg_sq);
  C* copy_out = static_cast<C*>(b.copy_out);
  for (int64_t i = begin; i < end; i += V::kWidth) {
    update_vector<kStream, V>(param + i, grad + i, exp_avg + i, exp_avg_sq + i, offset(copy_out, i),
                              i, k);
  }
}

template <class V, class G, class C, class S, class P>
void update_range(const AdamBuffers& b, const Consts<V>& k, int64_t begin, int64_t end) {
  const int64_t body_end = begin + (end - begin) / V::kWidth * V::kWidth;
  // Each vector's copy is kWidth 16-bit values, so one aligned start keeps every one aligned.
  constexpr bool kHalfCopy = std::is_same_v<C, Bf16> || std::is_same_v<C, F16>;
  const bool aligned = reinterpret_cast<uintptr_t>(offset(static_cast<C*>(b.copy_out), begin)) %
                           (V::kWidth * 2) ==
                       0;
  if (kHalfCopy && aligned) {
    update_body<true, V, G, C, S, P>(b, k, begin, body_end);
    V::fence();
  } else {
    update_body<false, V, G, C, S, P>(b, k, begin, body_end);
  }
  if (body_end < end) {
    const int64_t i = body_end;
    update_tail<V>(static_cast<P*>(b.param) + i, static_cast<const G*>(b.grad) + i,
                   static_cast<S*>(b.exp_avg) + i, static_cast<S*>(b.exp_avg_sq) + i,
                   offset(static_cast<C*>(b.copy_out), i), end - i, i, k);
  }
}

// bf16 masters are their own 16-bit copy: they are instantiated without a copy-out only, so
// the instances grow by 2 per (gradient, moments) pair rather than by 8.
template <class V, class G, class S>
void update_range_with_state(const AdamBuffers& b, const Consts<V>& k, int64_t begin, int64_t end) {
  if (b.param_type == ElemType::kBFloat16) {
    if (b.param_rounding == StateRounding::kNearest) {
      return update_range<V, G, NoCopy, S, Bf16>(b, k, begin, end);
    }
    return update_range<V, G, NoCopy, S, Bf16Stochastic>(b, k, begin, end);
  }
  if (b.copy_out == nullptr) return update_range<V, G, NoCopy, S, float>(b, k, begin, end);
  switch (b.copy_type) {
    case ElemType::kFloat32: return update_range<V, G, float, S, float>(b, k, begin, end);
    case ElemType::kBFloat16: return update_range<V, G, Bf16, S, float>(b, k, begin, end);
    case ElemType::kFloat16: return update_range<V, G, F16, S, float>(b, k, begin, end);
  }
}

template <class V, class G>
void update_range_with_grad(const AdamBuffers& b, const Consts<V>& k, int64_t begin, int64_t end) {
  if (b.state_type == ElemType::kFloat32) {
    return update_range_with_state<V, G, float>(b, k, begin, end);
  }
  if (b.state_rounding == StateRounding::kNearest) {
    return update_range_with_state<V, G, Bf16>(b, k, begin, end);
  }
  update_range_with_state<V, G, Bf16Stochastic>(b, k, begin, end);
}

// The kernel of adam_isa.h for ISA V.
template <class V>
void adam_range(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end) {
  const Consts<V> k(c, b.seed);
  switch (b.grad_type) {
    case ElemType::kFloat32: return update_range_with_grad<V, float>(b, k, begin, end);
    case ElemType::kBFloat16: return update_range_with_grad<V, Bf16>(b, k, begin, end);
    case ElemType::kFloat16: return update_range_with_grad<V, F16>(b, k, begin, end);
  }
}

}  // namespace
}  // namespace zt::hybrid_adam::simd
