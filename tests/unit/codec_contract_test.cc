// The codec contract every codec plugin of the build keeps (zt/codec.h): a NaN or inf it is
// given decodes as NaN or inf, itself or its block's, so the engine, which finds an overflowing
// step by the decoded sums, still skips it. Run on each codec with each of its modes.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "zt/codec.h"
#include "zt/host/plugin_loader.h"
#include "zt/options.h"

namespace {

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

std::unique_ptr<zt::Codec> make(const zt::PluginRecord& rec,
                                const std::map<std::string, zt::Value>& values) {
  const auto* plugin = dynamic_cast<const zt::CodecPlugin*>(rec.factory);
  REQUIRE(plugin != nullptr);
  return plugin->create(zt::Options("codec.gradients", plugin->options(), values, {}));
}

}  // namespace

TEST_CASE("every codec decodes a NaN or inf it encodes as NaN or inf") {
  zt::PluginCatalog catalog;
  const std::vector<std::pair<std::string, std::map<std::string, zt::Value>>> modes = {
      {"codec_blockq", {{"bits", int64_t{8}}}},
      {"codec_blockq", {{"bits", int64_t{4}}, {"block", int64_t{64}}}},
      {"codec_bf16", {{"rounding", std::string("nearest")}}},
      {"codec_bf16", {{"rounding", std::string("toward_zero")}}}};
  // NaNs whose payload a rounding add would carry into the sign (0x7FFF8000 became -0.0), a
  // negative one, and both infinities, among finite values.
  const std::map<int64_t, float> planted = {{5, from_bits(0x7FFF8000u)},
                                            {130, from_bits(0xFFFFFFFFu)},
                                            {300, std::numeric_limits<float>::infinity()},
                                            {700, -std::numeric_limits<float>::infinity()}};
  std::vector<float> in(1024);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<float>(i)) * 3.0f;
  for (const auto& [i, x] : planted) in[static_cast<size_t>(i)] = x;
  for (const auto& [id, values] : modes) {
    CAPTURE(id);
    CAPTURE(values.begin()->second.index());
    const std::unique_ptr<zt::Codec> codec = make(catalog.load(id), values);
    std::vector<uint8_t> encoded(static_cast<size_t>(codec->encoded_bytes(1024)));
    std::vector<float> out(1024);
    codec->encode(in.data(), 1024, encoded.data());
    codec->decode(encoded.data(), 1024, out.data());
    for (const auto& [i, x] : planted) {
      CAPTURE(i);
      CHECK_FALSE(std::isfinite(out[static_cast<size_t>(i)]));
    }
    // A value in no planted one's block (768-1023 for blocks of 256) still decodes finite.
    CHECK(std::isfinite(out[900]));
  }
}
