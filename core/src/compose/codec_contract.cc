#include "compose/codec_contract.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "zt/error.h"

namespace zt {

namespace {

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

std::string value_text(float x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

// Values a gradient may hold: both signs across 30 binades up to 2^10 (an fp16 codec must not
// be refused for overflowing what gradients seldom reach), denormals and zeros. Lengths
// are a power of two and one that is not, so that a last partial block is tried too.
std::vector<float> finite_run(int64_t numel) {
  std::vector<float> run(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) {
    const float wave = std::sin(0.37f * static_cast<float>(i));
    run[static_cast<size_t>(i)] = wave * std::ldexp(1.0f, static_cast<int>(i % 31) - 20);
  }
  if (numel > 3) {
    run[1] = 0.0f;
    run[2] = -0.0f;
    run[3] = std::numeric_limits<float>::denorm_min();
  }
  return run;
}

class ContractCheck {
 public:
  ContractCheck(const Codec& codec, const std::string& id, const std::string& key)
      : codec_(codec), id_(id), key_(key) {}

  // decode(encode(in)) with the size and determinism promises checked on the way.
  std::vector<float> round_trip(const std::vector<float>& in) const {
    const auto numel = static_cast<int64_t>(in.size());
    const int64_t bytes = codec_.encoded_bytes(numel);
    if (bytes < 0) {
      fail("encoded_bytes(" + std::to_string(numel) + ") is " + std::to_string(bytes) +
           ", below 0");
    }
    std::vector<uint8_t> first(static_cast<size_t>(bytes)), second(static_cast<size_t>(bytes));
    codec_.encode(in.data(), numel, first.data());
    codec_.encode(in.data(), numel, second.data());
    if (first != second) {
      fail("two encodes of the same " + std::to_string(numel) +
           " values wrote different bytes; every rank must decode what its sender encoded, and "
           "a resume with error feedback must code as the first run did");
    }
    std::vector<float> out(in.size());
    codec_.decode(first.data(), numel, out.data());
    return out;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw PluginError("plugin '" + id_ + "' (codec, " + key_ + ") breaks the codec contract of " +
                      "zt/codec.h: " + what + "; fix the codec, or choose codec_blockq for " +
                      key_);
  }

  void check() const {
    if (const int64_t none = codec_.encoded_bytes(0); none != 0) {
      fail("encoded_bytes(0) is " + std::to_string(none) + ", not 0");
    }
    for (const int64_t numel : {int64_t{4096}, int64_t{1000}}) {
      const std::vector<float> in = finite_run(numel);
      const std::vector<float> out = round_trip(in);
      for (size_t i = 0; i < in.size(); ++i) {
        if (!std::isfinite(out[i])) {
          fail("the finite value " + value_text(in[i]) + " at element " + std::to_string(i) +
               " of " + std::to_string(numel) + " decodes as " + value_text(out[i]) +
               ", and the engine would skip every step as an overflow");
        }
      }
      // A NaN whose payload a rounding add carries into the sign, a negative one, and both
      // infinities, each planted alone among the finite values: the decoded run must hold a
      // NaN or inf (at the element, or wherever the codec marks its block), which is what the
      // engine looks for.
      const std::vector<std::pair<size_t, float>> planted = {
          {5, from_bits(0x7FFF8000u)},
          {130, from_bits(0xFFFFFFFFu)},
          {300, std::numeric_limits<float>::infinity()},
          {static_cast<size_t>(numel) - 1, -std::numeric_limits<float>::infinity()}};
      for (const auto& [i, x] : planted) {
        std::vector<float> overflowing = in;
        overflowing[i] = x;
        const std::vector<float> decoded = round_trip(overflowing);
        if (std::all_of(decoded.begin(), decoded.end(), [](float v) { return std::isfinite(v); })) {
          fail(value_text(x) + " at element " + std::to_string(i) + " of " + std::to_string(numel) +
               " decodes as the finite " + value_text(decoded[i]) +
               ", and no other element as NaN or inf; the engine finds an overflowing step by "
               "the decoded values and would train on it");
        }
      }
    }
  }

 private:
  const Codec& codec_;
  const std::string& id_;
  const std::string& key_;
};

}  // namespace

void check_codec_contract(const Codec& codec, const std::string& id, const std::string& key) {
  ContractCheck(codec, id, key).check();
}

}  // namespace zt
