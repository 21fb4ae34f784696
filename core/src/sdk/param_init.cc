// Counter-based initial values: element i of parameter `name` is a function of (seed, name, i)
// alone. Its 128 random bits are Philox4x32-10 (Salmon et al., SC'11, as in Random123) of the
// counter i under a 64-bit key hashed from the seed and the name, so a rank fills any slice on its
// own, in parallel, and gets what a process filling the whole tensor gets. The generator is
// written out here rather than taken from ATen so values never change with the LibTorch version
// (the CPU and GPU machines run different ones).
#include "zt/param_init.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "zt/error.h"

namespace zt {

namespace {

// Elements per task: large enough that a task outweighs at::parallel_for's overhead, small enough
// that both cores get work from a 1M-element tensor.
constexpr int64_t kGrain = 1 << 15;
constexpr double kTwoPi = 6.283185307179586476925286766559;

// splitmix64's finaliser: spreads every input bit over the whole word.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

struct PhiloxKey {
  uint32_t k0, k1;
};

// Mixing the seed on its own first keeps a (seed, name) pair from colliding with another whose
// seed and name hash differ by the same bits.
PhiloxKey key_of(uint64_t seed, const std::string& name) {
  const uint64_t k = mix64(mix64(fnv1a(name)) ^ mix64(seed ^ 0x5a17ULL));
  return {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
}

struct Bits128 {
  uint64_t lo, hi;
};

// Philox4x32-10 of the counter (index, 0): ten rounds of two 32x32->64 multiplies.
inline Bits128 philox(uint64_t index, PhiloxKey key) {
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32), c2 = 0,
           c3 = 0;
  uint32_t k0 = key.k0, k1 = key.k1;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9U;
      k1 += 0xBB67AE85U;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53U) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57U) * c2;
    c0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    c1 = static_cast<uint32_t>(p1);
    c2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c3 = static_cast<uint32_t>(p0);
  }
  return {(static_cast<uint64_t>(c1) << 32) | c0, (static_cast<uint64_t>(c3) << 32) | c2};
}

// A uniform in the open interval (0, 1) from the top 53 bits: never 0, so log() stays finite.
inline double open_unit(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

template <typename Value>
void fill_each(float* dst, int64_t first, int64_t n, const Value& value) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = value(static_cast<uint64_t>(first + i));
  });
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The shape's element count; InternalError for a negative dimension.
int64_t checked_numel(const std::string& where, const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      throw InternalError(where + " has shape " + shape_str(shape) +
                          " with a negative dimension; declare every size >= 0");
    }
    numel *= d;
  }
  return numel;
}

void check_out(const std::string& where, const at::Tensor& out) {
  if (!out.defined() || !out.device().is_cpu() || out.scalar_type() != at::kFloat ||
      out.dim() != 1 || !out.is_contiguous()) {
    throw InternalError(where + ": out must be a contiguous 1-D fp32 CPU tensor, got " +
                        (out.defined()
                             ? out.toString() + " of " + std::to_string(out.dim()) + " dimensions" +
                                   (out.is_contiguous() ? "" : ", not contiguous")
                             : std::string("an undefined tensor")));
  }
}

void check_init(const std::string& where, const ParamInit& init) {
  const bool spread = init.kind == ParamInit::Kind::kNormal ||
                      init.kind == ParamInit::Kind::kUniform;
  if (!std::isfinite(init.scale) || (spread && init.scale < 0)) {
    throw InternalError(where + ": init scale " + std::to_string(init.scale) +
                        " is not usable; a normal's std and a uniform's bound must be finite "
                        "and >= 0, a constant finite");
  }
  if (init.kind == ParamInit::Kind::kCustom && !init.custom) {
    throw InternalError(where + ": a custom init has no function; use ParamInit::from_function");
  }
}

// kCustom: the whole tensor from the model's function, then the slice.
void fill_custom(const std::string& where, const ParamInit& init, const std::vector<int64_t>& shape,
                 int64_t first, float* dst, int64_t n) {
  at::Tensor full = at::empty(shape, at::kFloat);
  init.custom(full);
  if (full.sizes() != at::IntArrayRef(shape) || full.scalar_type() != at::kFloat ||
      !full.is_contiguous()) {
    throw InternalError(where + ": the custom init changed its tensor to " + full.toString() + " " +
                        shape_str(full.sizes().vec()) +
                        "; it must write the values in place, keeping fp32 and the shape");
  }
  std::memcpy(dst, full.data_ptr<float>() + first, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

void fill_param_init(const ParamInit& init, uint64_t seed, const std::string& name,
                     const std::vector<int64_t>& shape, int64_t first, const at::Tensor& out) {
  const std::string where = "fill_param_init: parameter '" + name + "'";
  const int64_t numel = checked_numel(where, shape);
  check_out(where, out);
  check_init(where, init);
  const int64_t n = out.numel();
  if (first < 0 || first > numel - n) {
    throw InternalError(where + " (shape " + shape_str(shape) + ", " + std::to_string(numel) +
                        " elements): elements [" + std::to_string(first) + ", " +
                        std::to_string(first + n) +
                        ") are out of range; first must be >= 0 "
                        "and first + out.numel() <= " +
                        std::to_string(numel));
  }
  if (n == 0) return;
  float* dst = out.data_ptr<float>();
  const PhiloxKey key = key_of(seed, name);
  const double scale = init.scale;
  switch (init.kind) {
    case ParamInit::Kind::kNormal:
      // Box-Muller from the element's own two uniforms, keeping the cosine branch only, so an
      // element never depends on its neighbour (a slice may start at any index).
      fill_each(dst, first, n, [key, scale](uint64_t i) {
        const Bits128 b = philox(i, key);
        const double r = std::sqrt(-2.0 * std::log(open_unit(b.lo)));
        return static_cast<float>(scale * r * std::cos(kTwoPi * open_unit(b.hi)));
      });
      return;
    case ParamInit::Kind::kUniform:
      fill_each(dst, first, n, [key, scale](uint64_t i) {
        return static_cast<float>(scale * (2.0 * open_unit(philox(i, key).lo) - 1.0));
      });
      return;
    case ParamInit::Kind::kConstant: std::fill(dst, dst + n, static_cast<float>(scale)); return;
    case ParamInit::Kind::kCustom: fill_custom(where, init, shape, first, dst, n); return;
  }
  throw InternalError(where + ": unknown ParamInit kind " +
                      std::to_string(static_cast<int>(init.kind)));
}

void init_param(const at::Tensor& param, const ParamInit& init, uint64_t seed,
                const std::string& name) {
  if (!param.defined() || !param.device().is_cpu() || param.scalar_type() != at::kFloat ||
      !param.is_contiguous()) {
    throw InternalError("init_param: parameter '" + name +
                        "' must be a contiguous fp32 CPU tensor, got " +
                        (param.defined() ? param.toString() : std::string("an undefined tensor")) +
                        "; build the model in fp32 on the CPU before initialising it");
  }
  at::NoGradGuard no_grad;
  // detach(): the values are written through the pointer, outside autograd's view of the leaf.
  fill_param_init(init, seed, name, param.sizes().vec(), 0, param.detach().view({-1}));
}

}  // namespace zt
