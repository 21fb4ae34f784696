// A DeepSpeed JSON config (ds_config.json) read into zt config settings: each key DeepSpeed's
// ZeRO and main config pages define, for what zt supports, becomes the zt key it means, with
// its origin ("ds.json: zero_optimization.stage") for messages and --print-config. The TOML
// file and --set overrides win over these (Config::load_file's `base`). Keys zt does not
// support are refused, each named with why or the nearest zt key (lenient: warnings).
// "auto" values (Hugging Face style) leave the key to the zt config.
// Thread safety: pure functions of their arguments and the file.
#pragma once

#include <string>
#include <vector>

#include "zt/host/config.h"

namespace zt::trainer {

struct DeepSpeedSettings {
  std::vector<ConfigSetting> settings;
  std::vector<std::string> warnings;  // deprecated forms, and unsupported keys when lenient
};

// Reads `path`. `world`: the job's ranks, for DeepSpeed's batch rule (train_batch_size =
// train_micro_batch_size_per_gpu x gradient_accumulation_steps x world; given two, the third
// is derived). Throws ConfigError naming every problem (JSON syntax with line and column,
// unsupported keys, wrong types, a batch that does not multiply out).
DeepSpeedSettings read_deepspeed_config(const std::string& path, bool lenient, int world);
// The same from text; `name` stands for the file in messages.
DeepSpeedSettings read_deepspeed_json(const std::string& text, const std::string& name,
                                      bool lenient, int world);

}  // namespace zt::trainer
