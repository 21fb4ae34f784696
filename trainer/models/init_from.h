// model.init_from: a run that starts from a weights file (fine-tuning) instead of the seeded
// init. The file is safetensors, as `trainer export` writes it: a GPT under Hugging Face GPT-2
// names (with or without the "transformer." prefix; HF's attention-mask buffers and the tied
// lm_head.weight are skipped) in HF's Conv1D layout, an MLP under zt's own names; F32, BF16 or
// F16 elements, converted to fp32. Every model parameter must be in the file at its shape, and
// every file tensor must be a model parameter, so a file of another model size never loads.
// The tensors are read one at a time (never the whole file in memory).
// Thread safety: one call at a time per model.
#pragma once

#include <string>

#include "models/model.h"
#include "zt/config.h"

namespace zt::models {

// Overwrites every parameter of `model` with the file's value.
//   path:  in, the safetensors file (relative to the current folder).
//   where: in, where model.init_from was set ("job.toml:7:1"), for messages.
// Throws ConfigError (naming the file, model.init_from and `where`) for a model tensor the
// file lacks (saying what the file holds), a file tensor the model lacks, a shape that differs
// (the first one, both shapes) or a dtype other than F32/BF16/F16, or a file that is not
// safetensors; IoError when the file cannot be read. Checks every tensor before changing any.
void load_weights(Model& model, const std::string& path, const std::string& where);

// load_weights() from config's model.init_from when it is set; nothing otherwise.
void apply_init_from(Model& model, const Config& config);

}  // namespace zt::models
