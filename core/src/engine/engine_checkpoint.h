// The engine's side of checkpoints (zt/host/checkpoint.h): which pieces a rank saves and where
// their bytes come from, and a load that fills this rank's master weights and optimizer states from
// any saved layout and puts them into the parameters as a step would.
//
// Pieces: every group's flat buffer is split evenly among the ranks, rank r saving elements
// [r * padded / world, (r + 1) * padded / world) — in stages 1-3 exactly the shard it owns, in
// stage 0 (where every rank holds everything) a 1/world share, so each element is saved once.
// That range cut at the parameters' bounds (gaps and padding are not saved) gives one piece per
// parameter it touches, for "param" (the fp32 master) and each optimizer state, declared group
// by group, kind by kind, in flat-offset order (so a streamed array is read front to back once).
// Thread safety: one thread (the training thread).
#pragma once

#include <string>
#include <vector>

#include "engine/engine_parts.h"
#include "zt/host/checkpoint.h"

namespace zt {

// "param" (the master), then every optimizer state: kind k is ShardIo array k.
std::vector<std::string> checkpoint_kinds(const Optimizer& optimizer);
// EngineCounters' name of a master or state dtype: "fp32" or "bf16".
std::string optimizer_dtype_name(at::ScalarType dtype);

// Engine::save_checkpoint: declares and writes this rank's pieces and the counters.
void save_engine_checkpoint(EngineParts& engine, CheckpointRankWriter& writer);
// A run [begin, begin + count) of group `gi`'s master, just written into its streamed (file)
// tier, put into the parameter copies the engine computes with (stages 0-2 the flat buffer, stage
// 3 the parameter shard or the whole tile of its tier file: the run must then be one whole tile),
// since refresh_parameters() skips streamed groups. Throws IoError when a tier write fails.
void put_streamed_master(EngineParts& engine, int gi, int64_t begin, float* data, int64_t count);

// Engine::load_checkpoint (collective): checks the checkpoint is of this model and optimizer
// (ConfigError naming the first tensor or state that differs), fills this rank's held range of
// every array (states saved in another dtype are converted: bf16 into fp32 exactly, fp32 into bf16
// rounded to nearest even), restores the counters and refreshes the parameters.
void load_engine_checkpoint(EngineParts& engine, const CheckpointReader& reader);

}  // namespace zt
