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

// A setting the JSON made that means what DeepSpeed means only while the resolved config keeps
// another key where the JSON put it: a stage-3 key at zero.stage = 3, a bf16 state with bf16
// compute. The TOML or --set wins over the JSON, and may move that key.
struct DeepSpeedCondition {
  std::string origin;  // the conditional setting's ("ds.json: zero_optimization.zero_hpz_...")
  std::string key;     // the key it depends on ("zero.stage")
  Value value;         // the value it needs there (3)
  std::string why;     // "applies only at stage 3 (DeepSpeed ignores it below)"
};

struct DeepSpeedSettings {
  std::vector<ConfigSetting> settings;
  std::vector<std::string> warnings;  // deprecated forms, and unsupported keys when lenient
  std::vector<DeepSpeedCondition> conditions;
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
