// Fuzz target: a training data file as [data] reads it: kind "text" (bytes are tokens) and kind
// "tokens" with 2- and 4-byte ids, with and without a held-out validation tail; then windows
// at the start, the middle and the end of the stream. Either samples or a ConfigError naming
// the file (too short, a size that is not whole tokens, an id past the vocabulary).
#include <array>

#include "data/data_source.h"
#include "fuzz_support.h"
#include "zt/error.h"

namespace {

struct Kind {
  const char* kind;
  int element_size;
  double val_fraction;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zt::fuzz::input_file("tokens.bin", data, size);
  zt::ModelInputs inputs;
  inputs.tokens = true;
  inputs.seq_len = 8;
  inputs.vocab = 300;
  const std::array<Kind, 4> kinds = {
      {{"text", 1, 0.0}, {"tokens", 2, 0.0}, {"tokens", 4, 0.0}, {"tokens", 2, 0.25}}};
  for (const Kind& k : kinds) {
    zt::trainer::DataSettings settings;
    settings.kind = k.kind;
    settings.kind_where = "fuzz.toml:1:1";
    settings.path = path;
    settings.path_where = "fuzz.toml:2:1";
    settings.element_size = k.element_size;
    settings.micro_batch = 2;
    settings.grad_accum = 1;
    settings.seed = 7;
    settings.val_fraction = k.val_fraction;
    try {
      const auto source = zt::data::make_data(settings, inputs, "gpt");
      for (const int64_t first : {int64_t{0}, int64_t{1000}, int64_t{1} << 40}) {
        try {
          (void)source->get_samples(first, 2);
        } catch (const zt::Error& e) {
          zt::fuzz::refused(e);
        }
      }
      if (k.val_fraction > 0) {
        const auto val = zt::data::make_val_data(settings, inputs, "gpt", 2);
        (void)val->get_samples(0, 2);
      }
    } catch (const zt::Error& e) {
      zt::fuzz::refused(e);
    }
  }
  return 0;
}
