// check_codec_contract: a codec plugin's promises (zt/codec.h) tried on a few runs when the
// codec is made, before it codes a single collective.
//
// Why: the engine finds an overflowing step by the decoded gradients and skips it. A third
// party's codec that decodes a NaN as a finite value would train on that step without a word,
// one that turns finite values into NaN would skip every step, and one whose bytes differ from
// one encode of the same values to the next breaks the bit-for-bit resume of error feedback.
// Those are cheap to try on a few thousand values; a codec's accuracy is its author's (the
// bench's codec table measures ours).
#pragma once

#include <string>

#include "zt/codec.h"

namespace zt {

// Throws PluginError naming plugin `id`, the TOML key that chose it (`key`, e.g.
// "plugins.codec_gradients"), the broken promise and the element it broke on.
void check_codec_contract(const Codec& codec, const std::string& id, const std::string& key);

}  // namespace zt
