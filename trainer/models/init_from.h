// model.init_from: a run that starts from a weights file (fine-tuning) instead of the seeded
// init. The file is safetensors, as `trainer export` writes it: a GPT under Hugging Face GPT-2
// names (with or without the "transformer." prefix; HF's attention-mask buffers and the tied
// lm_head.weight are skipped) in HF's Conv1D layout, an MLP under zt's own names; F32, BF16 or
// F16 elements, converted to fp32. Every model parameter must be in the file at its shape, and
// every file tensor must be a model parameter, so a file of another model size never loads; a
// GPT's attention heads, which no shape tells, are checked where the file records them.
// The tensors are read one at a time (never the whole file in memory).
// Two targets: a Model built whole in this process (the single-process reference, tests), or an
// Engine holding the model in shards (partitioned construction), into which rank 0 writes each
// tensor through Engine::with_gathered_parameters, so no rank ever holds more than one of them.
// Thread safety: one call at a time per model or engine.
#pragma once

#include <string>
#include <vector>

#include "models/model.h"
#include "settings/job_settings.h"
#include "zt/host/engine.h"
#include "zt/model_source.h"

namespace zt::models {

// Overwrites every parameter of `model` with the file's value.
//   path:  in, the safetensors file (relative to the current folder).
//   where: in, where model.init_from was set ("job.toml:7:1"), for messages.
// Throws ConfigError (naming the file, model.init_from and `where`) for a model tensor the
// file lacks (saying what the file holds), a file tensor the model lacks, a shape that differs
// (the first one, both shapes) or a dtype other than F32/BF16/F16, or a file that is not
// safetensors; IoError when the file cannot be read. Checks every tensor before changing any.
void load_weights(Model& model, const std::string& path, const std::string& where);

// load_weights() from model.init_from when it is set; nothing otherwise.
void apply_init_from(Model& model, const trainer::ModelSettings& settings);

// Every parameter `source` declares, once (a tied weight under its first unit's name), in unit
// order: the names and shapes the engine built from it holds. Allocates no parameter.
std::vector<ParamDecl> declared_parameters(const ModelSource& source);

// load_weights() into a model the engine holds in shards. Collective: every rank calls it.
//   engine: in/out, the engine whose every parameter is overwritten (fp32 masters, the parameter
//           copies it computes with, tiers; optimizer states are left as they are).
//   kind:   in, the model's kind ("gpt" | "mlp"): how the file names its tensors.
//   params: in, the model's parameters' names and shapes (declared_parameters()).
//   path, where: in, as load_weights() above.
//   rank:   in, this process's rank: rank 0 reads the file's tensors, one at a time, and writes
//           each through Engine::with_gathered_parameters; every rank checks the file.
//   n_head: in, a GPT's attention heads, refused (ConfigError) when the file records others
//           (trainer export's zt.n_head); 0 checks nothing.
// Throws what load_weights() throws, with the same messages, before any tensor changes: on the
// ranks that found the fault, and an IoError naming the highest of them on the others (`comm`
// agrees on it); an IoError while rank 0 reads a tensor there (the other ranks: CommError naming
// rank 0; the tensors written before it keep their new values). CommError, IoError from the
// engine.
void load_weights(Engine& engine, Communicator& comm, const std::string& kind,
                  const std::vector<ParamDecl>& params, const std::string& path,
                  const std::string& where, int rank, int64_t n_head = 0);

// The engine's load_weights() from model.init_from when it is set, for the model of
// the settings' kind whose parameters are `params` (declared_parameters() of the
// source the engine was built from); nothing otherwise. Collective.
void apply_init_from(Engine& engine, Communicator& comm, const std::vector<ParamDecl>& params,
                     const trainer::ModelSettings& settings, int rank);

}  // namespace zt::models
