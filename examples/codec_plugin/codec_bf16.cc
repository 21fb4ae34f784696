// codec_bf16: an example codec plugin (zt/codec.h). Each fp32 value travels as its upper 16 bits,
// bfloat16: half the bytes, 8 significant bits, the full fp32 range. What a third party writes:
// a pure function each way, the bytes it needs, and its options.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "zt/codec.h"

namespace {

class Bf16Codec final : public zt::Codec {
 public:
  explicit Bf16Codec(bool nearest) : nearest_(nearest) {}

  int64_t encoded_bytes(int64_t numel) const override { return 2 * numel; }

  void encode(const float* in, int64_t numel, uint8_t* out) const override {
    for (int64_t i = 0; i < numel; ++i) {
      uint32_t bits;
      std::memcpy(&bits, in + i, 4);
      // A NaN stays a NaN (rounding could carry its payload into the sign: -0.0), so the
      // engine still sees the overflow and skips the step; an inf rounds to itself.
      if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
        bits = (bits & 0x80000000u) | 0x7FC00000u;
      } else if (nearest_) {
        // Round to nearest, ties to even: add half of the dropped part's weight, plus one when
        // the kept part is odd, before truncating.
        bits += 0x7FFFu + ((bits >> 16) & 1u);
      }
      const uint16_t half = static_cast<uint16_t>(bits >> 16);
      std::memcpy(out + 2 * i, &half, 2);
    }
  }

  void decode(const uint8_t* in, int64_t numel, float* out) const override {
    for (int64_t i = 0; i < numel; ++i) {
      uint16_t half;
      std::memcpy(&half, in + 2 * i, 2);
      const uint32_t bits = static_cast<uint32_t>(half) << 16;
      std::memcpy(out + i, &bits, 4);
    }
  }

  std::string describe() const override {
    return std::string("codec_bf16: bfloat16 payloads, rounded ") +
           (nearest_ ? "to nearest even" : "toward zero") + " (0.5x fp32)";
  }

 private:
  bool nearest_;
};

class Bf16CodecPlugin final : public zt::CodecPlugin {
 public:
  std::vector<zt::OptionSpec> options() const override {
    return {zt::opt_string("rounding", "nearest",
                           "how a value loses its low 16 bits: \"nearest\" (ties to even, error "
                           "at most half a bf16 step) or \"toward_zero\" (truncation: cheaper, "
                           "biased toward zero by half a step on average)",
                           {"nearest", "toward_zero"})};
  }

  std::unique_ptr<zt::Codec> create(const zt::Options& options) const override {
    return std::make_unique<Bf16Codec>(options.get_string("rounding") == "nearest");
  }
};

}  // namespace

ZT_PLUGIN(ZT_KIND_CODEC, ZT_PLUGIN_ID, "0.1.0", "bfloat16 payloads (example codec plugin)",
          Bf16CodecPlugin)
