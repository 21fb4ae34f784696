// Which elements of the flat buffers weight decay leaves alone (zero.no_weight_decay): the
// parameters whose names match a pattern, usually biases and norm gains, as GPT recipes
// (Megatron-LM, nanoGPT, Hugging Face's Trainer) exempt them. A shard mixes both kinds, so the
// optimizer is handed it in slices of one kind each (ShardTensors::weight_decay).
// Thread safety: plain functions; mark_decay_free writes the layout (the training thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zero/model_layout.h"
#include "zt/optimizer.h"

namespace zt {

// Whether `name` matches one of `patterns` (shell globs over the whole name, `*` crossing dots:
// "*.bias", "*ln*").
bool exempt_from_weight_decay(const std::string& name, const std::vector<std::string>& patterns);

// Sets every group's ParamGroup::decay_free from `patterns`. Returns a warning starting with
// `where` (the key and its place: "zero.no_weight_decay (job.toml:9:1)") naming the patterns
// that match no parameter, or "": a typo would decay what the user meant to exempt, unsaid,
// while a shipped config's "*ln*" may meet a model without LayerNorms (so no error).
std::string mark_decay_free(ModelLayout& layout, const std::vector<std::string>& patterns,
                            const std::string& where);

// Appends `whole`, which holds elements [flat_begin, flat_begin + numel) of `group`, to `out`
// as consecutive slices of one kind each (`whole` itself where no decay-free range meets it).
// A slice's tensors are views of the same elements of `whole`'s, its seed advanced by its
// offset.
void append_by_weight_decay(std::vector<ShardTensors>& out, const ShardTensors& whole,
                            const ParamGroup& group, int64_t flat_begin);

}  // namespace zt
