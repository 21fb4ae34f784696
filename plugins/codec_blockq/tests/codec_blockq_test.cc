// codec_blockq's oracle: the plugin, loaded as the engine loads it (PluginCatalog), against a
// double-precision reference of the block quantizer written here from the format's definition
// (block_quantizer.h): per block, scale = absmax / qmax, code = round-half-even(x / scale)
// clamped to +-qmax, value = code * scale. Over int8 and int4, block sizes 1..4096 and runs that
// end mid-block and mid-byte, on normal, heavy-tailed, constant, zero, tiny and huge values:
//   - the encoded size is 4 * blocks + codes bytes;
//   - each scale equals the reference's rounded to fp32;
//   - each decoded value equals the reference's code times the fp32 scale, except where x / scale
//     lies within rounding of a half (then the neighbouring code, and nothing further);
//   - every element is within half a scale step of its input (the bound per block), and each
//     block's largest magnitude decodes to +-qmax steps;
//   - encode is a pure function of the run: a chunk encoded alone decodes the same.
// A NaN or an infinity makes its block decode as NaN (never a silent finite value).
// Planted faults: a reference shifted by one code and a bound tightened below half a step must
// each be caught by the same checks (so the checks can fail).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "zt/codec.h"
#include "zt/error.h"
#include "zt/host/plugin_loader.h"
#include "zt/options.h"

namespace {

zt::PluginCatalog& catalog() {
  static zt::PluginCatalog instance;
  return instance;
}

std::unique_ptr<zt::Codec> make_codec(int64_t bits, int64_t block) {
  const auto& factory = static_cast<const zt::CodecPlugin&>(
      *catalog().load_kind("codec_blockq", ZT_KIND_CODEC, "plugins.codec_gradients").factory);
  std::map<std::string, zt::Value> values{{"bits", bits}, {"block", block}};
  return factory.create(zt::Options("codec.gradients", factory.options(), values, {}));
}

struct Reference {
  std::vector<double> scale;  // per block
  std::vector<double> ratio;  // x / scale per element (0 for a zero block)
};

Reference reference(const std::vector<float>& x, int bits, int64_t block) {
  const double qmax = (1 << (bits - 1)) - 1;
  Reference r;
  for (size_t first = 0; first < x.size(); first += static_cast<size_t>(block)) {
    const size_t end = std::min(x.size(), first + static_cast<size_t>(block));
    double m = 0;
    for (size_t i = first; i < end; ++i) m = std::max(m, std::fabs(static_cast<double>(x[i])));
    // The format stores a float scale: below FLT_MIN it keeps few bits, and the codes are
    // relative to what it keeps (above, the two agree to well within the checks' tolerance).
    const double exact = m / qmax;
    const double s = exact < std::numeric_limits<float>::min() ? static_cast<float>(exact) : exact;
    r.scale.push_back(s);
    for (size_t i = first; i < end; ++i) r.ratio.push_back(s > 0 ? x[i] / s : 0.0);
  }
  return r;
}

// The checks; `code_shift` and `bound_factor` plant faults into the reference side.
std::string check_run(const zt::Codec& codec, const std::vector<float>& x, int bits, int64_t block,
                      int code_shift = 0, double bound_factor = 1.0) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t blocks = (n + block - 1) / block;
  const int64_t want_bytes = 4 * blocks + (bits == 8 ? n : (n + 1) / 2);
  if (codec.encoded_bytes(n) != want_bytes) {
    return "encoded_bytes(" + std::to_string(n) + ") = " + std::to_string(codec.encoded_bytes(n)) +
           ", want " + std::to_string(want_bytes);
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(want_bytes) + 1, 0xA5);
  codec.encode(x.data(), n, bytes.data());
  if (bytes.back() != 0xA5) return "encode wrote past encoded_bytes";
  std::vector<float> y(x.size() + 1, 7.0f);
  codec.decode(bytes.data(), n, y.data());
  if (y.back() != 7.0f) return "decode wrote past numel";
  const Reference ref = reference(x, bits, block);
  const double qmax = (1 << (bits - 1)) - 1;
  for (int64_t b = 0; b < blocks; ++b) {
    float got_scale;
    std::memcpy(&got_scale, bytes.data() + 4 * b, 4);
    const float want_scale = static_cast<float>(ref.scale[static_cast<size_t>(b)]);
    if (got_scale != want_scale && std::fabs(got_scale - want_scale) > 1e-6 * want_scale) {
      return "block " + std::to_string(b) + ": scale " + std::to_string(got_scale) + ", want " +
             std::to_string(want_scale);
    }
    const int64_t first = b * block, end = std::min(n, first + block);
    double block_max = 0;
    int64_t at_max = first;
    for (int64_t i = first; i < end; ++i) {
      const double ratio = ref.ratio[static_cast<size_t>(i)];
      const double code = std::nearbyint(ratio) + code_shift;
      const double want = static_cast<float>(code) * got_scale;
      const bool near_half = std::fabs(std::fabs(ratio - std::trunc(ratio)) - 0.5) < 1e-4;
      const double got = y[static_cast<size_t>(i)];
      const bool equal = got == static_cast<float>(want);
      const bool neighbour = near_half && std::fabs(got - want) <= got_scale * 1.000001;
      if (!equal && !neighbour) {
        return "element " + std::to_string(i) + " (block " + std::to_string(b) +
               "): x = " + std::to_string(x[static_cast<size_t>(i)]) + " decoded " +
               std::to_string(got) + ", reference " + std::to_string(want);
      }
      const double err = std::fabs(got - x[static_cast<size_t>(i)]);
      // Half a step, relative, and the smallest float (subnormal scales round to it): a fixed
      // 1e-30 was far above half a step of the "tiny" and "minute" inputs' blocks.
      const double bound = bound_factor * 0.5 * ref.scale[static_cast<size_t>(b)] * (1 + 1e-5) +
                           std::numeric_limits<float>::denorm_min();
      if (err > bound) {
        return "element " + std::to_string(i) + ": error " + std::to_string(err) +
               " above half a step " + std::to_string(bound);
      }
      if (std::fabs(x[static_cast<size_t>(i)]) > block_max) {
        block_max = std::fabs(x[static_cast<size_t>(i)]);
        at_max = i;
      }
    }
    // (A scale of few bits, below FLT_MIN, may put the largest a step short of qmax.)
    if (block_max > 0 && got_scale >= std::numeric_limits<float>::min() &&
        std::fabs(std::fabs(y[static_cast<size_t>(at_max)]) / got_scale - qmax) > 1e-3) {
      return "block " + std::to_string(b) + ": its largest magnitude is not +-qmax steps";
    }
  }
  return "";
}

std::vector<float> values(const std::string& kind, int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::student_t_distribution<float> heavy(1.5f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) {
    if (kind == "normal") v = normal(gen);
    else if (kind == "heavy") v = heavy(gen);
    else if (kind == "constant") v = -0.75f;
    else if (kind == "zero") v = 0.0f;
    else if (kind == "tiny") v = normal(gen) * 1e-30f;
    // Scales below 2^-128, whose reciprocal overflows a float.
    else if (kind == "minute") v = normal(gen) * 1e-37f;
    else v = normal(gen) * 1e30f;  // huge
  }
  return x;
}

const char* const kKinds[] = {"normal", "heavy", "constant", "zero", "tiny", "minute", "huge"};

}  // namespace

TEST_CASE("int8 and int4 decode as the double-precision reference, within half a step") {
  int runs = 0;
  for (int bits : {8, 4}) {
    // 513 and 1001: blocks that start on an odd element and span the encoder's 512-element
    // slices, so an int4 code carried across a slice inside a block is checked too.
    for (int64_t block : {1, 7, 32, 256, 513, 1001, 4096}) {
      const auto codec = make_codec(bits, block);
      for (int64_t n : {0, 1, 2, 3, 255, 256, 257, 1001, 9000}) {
        for (const char* kind : kKinds) {
          const auto x = values(kind, n, static_cast<uint32_t>(n * 31 + block + bits));
          INFO("int" << bits << ", block " << block << ", n " << n << ", " << kind);
          CHECK(check_run(*codec, x, bits, block) == "");
          ++runs;
        }
      }
    }
  }
  CHECK(runs == 2 * 7 * 9 * 7);
}

TEST_CASE("the oracle catches a code off by one and a bound below half a step (planted)") {
  const auto x = values("normal", 1000, 5);
  for (int bits : {8, 4}) {
    const auto codec = make_codec(bits, 64);
    CHECK(check_run(*codec, x, bits, 64) == "");
    CHECK(check_run(*codec, x, bits, 64, /*code_shift=*/1).find("reference") != std::string::npos);
    CHECK(check_run(*codec, x, bits, 64, 0, /*bound_factor=*/0.9).find("above half a step") !=
          std::string::npos);
  }
}

TEST_CASE("a chunk encodes alone: each rank's chunk decodes the same as part of any run") {
  // The engine encodes every destination chunk on its own; a codec must not depend on its
  // neighbours (int4 pairs nibbles within the run, so odd chunk lengths matter).
  const auto x = values("heavy", 1001, 9);
  for (int bits : {8, 4}) {
    const auto codec = make_codec(bits, 100);
    for (int64_t split : {0, 1, 333, 500, 1001}) {
      std::vector<float> parts(x.size());
      std::vector<uint8_t> a(static_cast<size_t>(codec->encoded_bytes(split)));
      std::vector<uint8_t> b(static_cast<size_t>(codec->encoded_bytes(1001 - split)));
      // In place, as the engine encodes: the right chunk starts off any vector alignment (x + 1).
      codec->encode(x.data(), split, a.data());
      codec->encode(x.data() + split, 1001 - split, b.data());
      codec->decode(a.data(), split, parts.data());
      codec->decode(b.data(), 1001 - split, parts.data() + split);
      std::vector<float> left(x.begin(), x.begin() + split), right(x.begin() + split, x.end());
      INFO("int" << bits << ", split at " << split);
      CHECK(check_run(*codec, left, bits, 100) == "");
      CHECK(check_run(*codec, right, bits, 100) == "");
      // The same bytes as each chunk copied to its own buffer and encoded there, and
      // the same values decoded: a code depends on the values alone, not where they lie.
      std::vector<uint8_t> left_alone(a.size()), right_alone(b.size());
      codec->encode(left.data(), split, left_alone.data());
      codec->encode(right.data(), 1001 - split, right_alone.data());
      CHECK(a == left_alone);
      CHECK(b == right_alone);
      std::vector<float> alone(x.size());
      codec->decode(left_alone.data(), split, alone.data());
      codec->decode(right_alone.data(), 1001 - split, alone.data() + split);
      CHECK(std::memcmp(parts.data(), alone.data(), parts.size() * sizeof(float)) == 0);
      std::vector<uint8_t> again(a.size());
      codec->encode(x.data(), split, again.data());
      CHECK(again == a);  // deterministic
    }
  }
}

TEST_CASE("a NaN or an infinity is not lost: its block decodes as NaN, the others are untouched") {
  // A non-finite gradient must still reach the engine's overflow check after a coded hop.
  for (int64_t bits : {8, 4}) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
      CAPTURE(bits);
      CAPTURE(bad);
      const auto codec = make_codec(bits, 64);
      std::vector<float> x(300);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
      x[150] = bad;  // block 2: elements [128, 192)
      std::vector<uint8_t> bytes(static_cast<size_t>(codec->encoded_bytes(300)));
      std::vector<float> y(300);
      codec->encode(x.data(), 300, bytes.data());
      codec->decode(bytes.data(), 300, y.data());
      for (int64_t i = 0; i < 300; ++i) {
        CAPTURE(i);
        if (i >= 128 && i < 192) {
          CHECK(std::isnan(y[i]));
        } else {
          // Half a step of the block's scale, 8 / qmax.
          CHECK(std::abs(y[i] - x[i]) <= 4.0001f / static_cast<float>((1 << (bits - 1)) - 1));
        }
      }
    }
  }
}

TEST_CASE("bytes per element: int8 <= 0.27x and int4 <= 0.15x fp32 at blocks of 256") {
  const int64_t n = 1 << 20;
  CHECK(static_cast<double>(make_codec(8, 256)->encoded_bytes(n)) / (4.0 * n) <= 0.27);
  CHECK(static_cast<double>(make_codec(4, 256)->encoded_bytes(n)) / (4.0 * n) <= 0.15);
  CHECK(make_codec(8, 256)->describe().find("int8 blocks of 256") != std::string::npos);
}

TEST_CASE("a width the codec has not is a config error naming the key") {
  try {
    make_codec(6, 256);
    FAIL("bits = 6 was accepted");
  } catch (const zt::ConfigError& e) {
    CHECK(std::string(e.what()).find("codec.gradients.bits = 6") != std::string::npos);
    CHECK(std::string(e.what()).find("use 8 or 4") != std::string::npos);
  }
}
