#include "models/gelu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <cstring>

namespace zt::models {

namespace {

// 16 floats: one AVX-512 register, two AVX2 ones, four SSE2 ones. GCC's vector extensions let
// one body serve every ISA the kernels below are cloned for.
constexpr int kLanes = 16;
typedef float VecF __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t VecI __attribute__((vector_size(kLanes * sizeof(int32_t))));

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kCubic = 0.044715f;

// The helpers pass 64-byte vectors by value, which GCC warns changes the calling convention
// between ISAs (-Wpsabi); they are always inlined into the kernels (whose own arguments are
// pointers), so no call crosses one.
// (GCC reports it at the end of the file, so the pragma holds to there.)
#pragma GCC diagnostic ignored "-Wpsabi"
#define ZT_GELU_INLINE inline __attribute__((always_inline))

ZT_GELU_INLINE VecF load(const float* p) {
  VecF v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

ZT_GELU_INLINE void store(float* p, VecF v) { std::memcpy(p, &v, sizeof(v)); }

// e^a, within about 2 float ulps for a in [-87, 88] (a is clamped there: past it the sigmoid
// below is 0 or 1 to float precision anyway). a = n ln2 + r with |r| <= ln2 / 2 (ln2 in two
// parts, so n ln2 is exact enough), e^r by its Taylor series to r^7 (truncation below 6e-9
// relative), then times 2^n built in the exponent bits.
ZT_GELU_INLINE VecF exp_clamped(VecF a) {
  a = a < -87.0f ? -87.0f : a;
  a = a > 88.0f ? 88.0f : a;
  // Round a / ln2 to the nearest integer: adding and subtracting 1.5 * 2^23 drops the fraction.
  const float kRound = 12582912.0f;
  const VecF n = (a * 1.44269504088896341f + kRound) - kRound;
  const VecF r = (a - n * 0.693359375f) - n * -2.12194440e-4f;
  VecF p = r * (1.0f / 5040) + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const VecI bits = (__builtin_convertvector(n, VecI) + 127) << 23;
  VecF scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// The pieces both directions use: s = sigmoid(2z) = 0.5 * (1 + tanh(z)) and e = exp(-2z), so
// 1 - s = s * e keeps its precision where s is near 1.
struct Sigmoid {
  VecF s, e;
};

ZT_GELU_INLINE Sigmoid sigmoid_2z(VecF x) {
  const VecF two_z = x * (2 * kSqrt2OverPi + (2 * kSqrt2OverPi * kCubic) * (x * x));
  const VecF e = exp_clamped(-two_z);
  return {1.0f / (1.0f + e), e};
}

// y = x * s
ZT_GELU_INLINE VecF forward_lanes(VecF x) { return x * sigmoid_2z(x).s; }

// dy/dx = s + x * s (1 - s) * d(2z)/dx = s * (1 + x * (s e) * 2 sqrt(2/pi) (1 + 3c x^2))
ZT_GELU_INLINE VecF backward_lanes(VecF g, VecF x) {
  const Sigmoid t = sigmoid_2z(x);
  const VecF d2z = 2 * kSqrt2OverPi + (2 * kSqrt2OverPi * 3 * kCubic) * (x * x);
  return g * t.s * (1.0f + x * (t.s * t.e) * d2z);
}

// bf16 lanes: the upper half of a float's bits. Widening is exact; narrowing rounds to the
// nearest even bf16, as c10::BFloat16 does, and keeps NaN a (quiet) NaN.
typedef uint16_t VecH __attribute__((vector_size(kLanes * sizeof(uint16_t))));
typedef uint32_t VecU __attribute__((vector_size(kLanes * sizeof(uint32_t))));

ZT_GELU_INLINE VecF load(const c10::BFloat16* p) {
  VecH h;
  std::memcpy(&h, p, sizeof(h));
  const VecU bits = __builtin_convertvector(h, VecU) << 16;
  VecF v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

ZT_GELU_INLINE void store(c10::BFloat16* p, VecF v) {
  VecU bits;
  std::memcpy(&bits, &v, sizeof(bits));
  VecU rounded = (bits + (0x7FFFu + ((bits >> 16) & 1u))) >> 16;
  rounded = v != v ? 0x7FC0u : rounded;  // the carry above could turn a NaN into an infinity
  const VecH h = __builtin_convertvector(rounded, VecH);
  std::memcpy(p, &h, sizeof(h));
}

// The loops over [0, n): whole vectors, then the tail through a padded vector. T is float or
// c10::BFloat16 (computed in float, rounded once on the store).
template <typename T>
ZT_GELU_INLINE void forward_loop(const T* x, T* y, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(y + i, forward_lanes(load(x + i)));
  if (i == n) return;
  T in[kLanes] = {}, out[kLanes];
  std::memcpy(in, x + i, (n - i) * sizeof(T));
  store(out, forward_lanes(load(in)));
  std::memcpy(y + i, out, (n - i) * sizeof(T));
}

template <typename T>
ZT_GELU_INLINE void backward_loop(const T* g, const T* x, T* dx, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(dx + i, backward_lanes(load(g + i), load(x + i)));
  if (i == n) return;
  T gin[kLanes] = {}, xin[kLanes] = {}, out[kLanes];
  std::memcpy(gin, g + i, (n - i) * sizeof(T));
  std::memcpy(xin, x + i, (n - i) * sizeof(T));
  store(out, backward_lanes(load(gin), load(xin)));
  std::memcpy(dx + i, out, (n - i) * sizeof(T));
}

// GCC builds one clone of each kernel per ISA and picks one when the library loads.
#define ZT_GELU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

ZT_GELU_CLONES void forward_kernel(const float* x, float* y, int64_t n) { forward_loop(x, y, n); }
ZT_GELU_CLONES void forward_kernel(const c10::BFloat16* x, c10::BFloat16* y, int64_t n) {
  forward_loop(x, y, n);
}
ZT_GELU_CLONES void backward_kernel(const float* g, const float* x, float* dx, int64_t n) {
  backward_loop(g, x, dx, n);
}
ZT_GELU_CLONES void backward_kernel(const c10::BFloat16* g, const c10::BFloat16* x,
                                    c10::BFloat16* dx, int64_t n) {
  backward_loop(g, x, dx, n);
}

// Elements per intra-op task: large enough that a task outweighs its scheduling.
constexpr int64_t kGrain = 32768;

bool fast_path(const at::Tensor& x) {
  return (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16) &&
         x.device().is_cpu() && x.layout() == at::kStrided;
}

// Runs `fn` with the element type of x (float or bf16).
template <typename Fn>
void with_element_type(const at::Tensor& x, Fn&& fn) {
  if (x.scalar_type() == at::kFloat) {
    fn(float{});
  } else {
    fn(c10::BFloat16{});
  }
}

class GeluTanh : public torch::autograd::Function<GeluTanh> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input) {
    const at::Tensor x = input.contiguous();
    at::Tensor y = at::empty_like(x);
    with_element_type(x, [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data_ptr<T>();
      T* yp = y.data_ptr<T>();
      at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
        forward_kernel(xp + begin, yp + begin, end - begin);
      });
    });
    ctx->save_for_backward({x});
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor g = grads[0].to(x.scalar_type()).contiguous();
    at::Tensor dx = at::empty_like(x);
    with_element_type(x, [&](auto zero) {
      using T = decltype(zero);
      const T* gp = g.data_ptr<T>();
      const T* xp = x.data_ptr<T>();
      T* dp = dx.data_ptr<T>();
      at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
        backward_kernel(gp + begin, xp + begin, dp + begin, end - begin);
      });
    });
    return {dx};
  }
};

}  // namespace

at::Tensor gelu_tanh(const at::Tensor& x) {
  if (!fast_path(x)) return at::gelu(x, "tanh");
  return GeluTanh::apply(x);
}

}  // namespace zt::models
