// codec_blockq: block-wise int8 / int4 quantization with an fp32 scale per block (ZeRO++'s qwZ
// and qgZ format). See block_quantizer.h for the format and README.md for what it trades.
#include <memory>
#include <string>

#include "block_quantizer.h"
#include "zt/codec.h"
#include "zt/error.h"

namespace {

class BlockCodec final : public zt::Codec {
 public:
  explicit BlockCodec(zt::blockq::Format format) : format_(format) {}
  int64_t encoded_bytes(int64_t numel) const override {
    return zt::blockq::encoded_bytes(format_, numel);
  }
  void encode(const float* in, int64_t numel, uint8_t* out) const override {
    zt::blockq::encode(format_, in, numel, out);
  }
  void decode(const uint8_t* in, int64_t numel, float* out) const override {
    zt::blockq::decode(format_, in, numel, out);
  }
  std::string describe() const override {
    const double ratio = static_cast<double>(encoded_bytes(1 << 20)) / (4.0 * (1 << 20));
    char text[128];
    std::snprintf(text, sizeof text,
                  "codec_blockq: int%d blocks of %lld with an fp32 scale "
                  "(%.3fx fp32)",
                  format_.bits, static_cast<long long>(format_.block), ratio);
    return text;
  }

 private:
  zt::blockq::Format format_;
};

class BlockCodecPlugin final : public zt::CodecPlugin {
 public:
  std::vector<zt::OptionSpec> options() const override {
    return {zt::opt_int("bits", 8,
                        "bits per code: 8 (0.254x fp32 at blocks of 256) or 4 (0.129x); "
                        "fewer bits, larger error per element (half a scale step at most)",
                        4, 8),
            zt::opt_int("block", 256,
                        "elements per block, each with its own fp32 scale (its largest "
                        "magnitude / qmax): smaller blocks follow outliers closer, for 4 more "
                        "bytes each",
                        1, 1 << 20)};
  }

  std::unique_ptr<zt::Codec> create(const zt::Options& options) const override {
    zt::blockq::Format format;
    format.bits = static_cast<int>(options.get_int("bits"));
    format.block = options.get_int("block");
    if (format.bits != 8 && format.bits != 4) {
      throw zt::ConfigError(options.where("bits").str() + ": " + options.table() +
                            ".bits = " + std::to_string(format.bits) +
                            " is not a width codec_blockq has; use 8 or 4");
    }
    return std::make_unique<BlockCodec>(format);
  }
};

}  // namespace

ZT_PLUGIN(ZT_KIND_CODEC, "codec_blockq", "0.1.0",
          "block-wise int8/int4 quantization with an fp32 scale per block (ZeRO++ qwZ/qgZ)",
          BlockCodecPlugin)
