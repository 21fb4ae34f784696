// Codec: encodes and decodes the payload of a collective, supplied by a codec plugin
// (codec_blockq, or a third party's). The engine chooses one per role ([plugins] codec_weights
// for stage 3's parameter all-gather, codec_gradients for the gradient reduce-scatter) and runs
// the collective on the encoded bytes (zero/coded_collectives.h): a weight shard is encoded once
// by its owner and decoded by every rank; a gradient's destination chunks are encoded once by
// their sender, exchanged all-to-all and decoded and summed in fp32 by their owner (ZeRO++'s
// qwZ and qgZ). Error feedback, when the job asks for it, is the engine's: it adds what the last
// encode lost before the next one, so a codec need only be a pure function of its input.
//
// Data: host memory, fp32 in and out. An encoded run of `numel` elements is exactly
// encoded_bytes(numel) bytes and depends only on those elements (a chunk encodes alone, so
// every rank can decode any rank's chunk). A job tries these promises on a few runs when it
// makes the codec (sizes, two encodes alike, finite values decoding finite, NaN and inf decoding
// non-finite) and refuses a codec that breaks one.
//
// Thread safety: a Codec is immutable once made; encode, decode and the rest are const and may
// run on several threads at once on disjoint buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "zt/api.h"
#include "zt/plugin.h"

namespace zt {

class ZT_API Codec {
 public:
  virtual ~Codec();
  // The bytes encode() writes for `numel` elements, numel >= 0 (0 for 0). Pure; never throws.
  virtual int64_t encoded_bytes(int64_t numel) const = 0;
  // Encodes a run of elements.
  //   in:    in, `numel` fp32 values, which may hold NaN or inf (an overflowing step's gradients
  //          are coded before the engine sees the sums): such a value must decode as NaN or inf
  //          (itself, or its block's), since the engine finds the overflow, and skips the step,
  //          by the decoded values.
  //   numel: in, >= 0.
  //   out:   out, encoded_bytes(numel) bytes, not overlapping `in`.
  // Never throws.
  virtual void encode(const float* in, int64_t numel, uint8_t* out) const = 0;
  // Decodes what encode() wrote for the same `numel`.
  //   in:    in, encoded_bytes(numel) bytes.
  //   numel: in, the count given to encode().
  //   out:   out, `numel` fp32 values, not overlapping `in`.
  // Never throws.
  virtual void decode(const uint8_t* in, int64_t numel, float* out) const = 0;
  // One line for run summaries, e.g. "int8 blocks of 256 with an fp32 scale (0.254x fp32)".
  // Never throws.
  virtual std::string describe() const = 0;
};

// Factory of a codec plugin (kind ZT_KIND_CODEC).
class ZT_API CodecPlugin : public Plugin {
 public:
  // Makes the codec of one role.
  //   options: in, the validated [codec.<role>] table (every declared key present).
  //   returns: the codec, never null.
  // Throws ConfigError for values only known to be wrong here, naming codec.<role>.<key>.
  virtual std::unique_ptr<Codec> create(const Options& options) const = 0;
};

}  // namespace zt
