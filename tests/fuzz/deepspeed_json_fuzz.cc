// Fuzz target: a DeepSpeed JSON config mapped to zt settings, strict and lenient, at one rank and
// at three (DeepSpeed's batch rule depends on the world). Either settings or a ConfigError.
#include "fuzz_support.h"
#include "settings/deepspeed_config.h"
#include "zt/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const bool lenient : {false, true}) {
    for (const int world : {1, 3}) {
      try {
        (void)zt::trainer::read_deepspeed_json(text, "fuzz.json", lenient, world);
      } catch (const zt::Error& e) {
        zt::fuzz::refused(e);
      }
    }
  }
  return 0;
}
