// `trainer export --checkpoint DIR --out FILE [--dtype fp32|bf16|fp16]`: a checkpoint's
// parameters as one safetensors file that other tools load (GPT under Hugging Face GPT-2 names
// in HF's Conv1D layout, see models/hf_names.h; an MLP under zt's own names), with the
// metadata {"format": "pt"} that HF writes. Streamed: one tensor in memory at a time, never the
// whole model. The file appears whole or not at all (written as FILE.tmp, then renamed).
// Thread safety: one call at a time.
#pragma once

#include <ostream>

#include "app/cli.h"

namespace zt::trainer {

// Writes the file and prints one line saying what was written. Returns the exit code (0).
// Throws ConfigError for a --checkpoint that is not a checkpoint (nor a folder of them),
// IoError naming --out when it cannot be written (or a checkpoint file cannot be read),
// NumericError when --dtype fp16 cannot hold a value (naming the tensor).
int export_weights(const CliArgs& args, std::ostream& out);

}  // namespace zt::trainer
