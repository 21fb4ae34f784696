// Fuzz target: a job's TOML config through the whole pipeline a run takes before its first rank
// starts: TOML++ parsing, the schema (the core's and the trainer's sections, plugin tables,
// did-you-mean), the rules across keys, the plugins it selects loaded and their tables checked,
// then JobSettings resolved from it. Either a resolved job or a ConfigError/PluginError.
#include "fuzz_support.h"
#include "settings/job_settings.h"
#include "settings/trainer_config.h"
#include "zt/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const zt::Config config = zt::trainer::load_config_string(text, "fuzz.toml");
    (void)zt::trainer::JobSettings::of(config);
    (void)config.to_toml();
  } catch (const zt::Error& e) {
    zt::fuzz::refused(e);
    // The refusal every bad file gets.
  }
  return 0;
}
