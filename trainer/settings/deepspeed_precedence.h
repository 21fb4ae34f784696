// What the TOML file and --set, which win over a DeepSpeed JSON's settings, did to them. A JSON
// value they replaced with another is said as a warning: a schedule or a batch taken half from
// each file is neither file's intent, and nothing else would say so. A JSON setting that means
// what DeepSpeed means only with another key where the JSON put it (DeepSpeedCondition: ZeRO++'s
// keys at stage 3, bf16 states with bf16 compute) is refused once they moved that key.
// Thread safety: pure functions of their arguments.
#pragma once

#include <string>
#include <vector>

#include "settings/deepspeed_config.h"

namespace zt::trainer {

// One line per JSON setting the file or --set replaced with another value, e.g.
// "zero.stage = 2 (job.toml:12:9) over 3 from ds.json: zero_optimization.stage: ...".
std::vector<std::string> replaced_deepspeed_settings(const Config& config,
                                                     const DeepSpeedSettings& ds);

// Throws ConfigError naming every condition of `ds` that `config` breaks: the JSON's key, what
// it needs, where the config set the key it needs otherwise, and the ways out.
void check_deepspeed_conditions(const Config& config, const DeepSpeedSettings& ds);

}  // namespace zt::trainer
