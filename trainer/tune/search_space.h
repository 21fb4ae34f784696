// The compositions `trainer estimate` sizes and `trainer tune` searches, as overrides of the user's
// job. The math never changes: the global batch stays micro_batch x grad_accum x world.
//   grid: stage 0-3 x offload placement (none; optimizer states in offload_cpu or offload_nvme;
//         at stage 3 parameter shards too) x micro batch (every divisor of the samples a rank
//         takes per step, grad_accum the rest) x, when the ranks span hosts, the MiCS group
//         (every rank, or the ranks of one host).
//   around: one knob of a composition changed at a time: the other shard strategy, its bucket
//         size, the reduce bucket, stage 3's prefetch and persistence threshold, the offload
//         fractions and tiers, sub_group_size and offload_nvme's queue depth, and Adam's moments
//         in bf16 where they stream from offload_nvme, and where the ranks span hosts ZeRO++'s
//         codecs on the collectives between them (the knobs that change the losses, which the
//         final A/B checks).
// Thread safety: pure functions of their inputs.
#pragma once

#include <vector>

#include "settings/job_settings.h"
#include "tune/composition.h"

namespace zt::trainer {

// `job`: the user's (its per-rank samples per step are kept; a job without plugins.shard gets
// shard_bucket at stages 1-3, and its own spelling of the MiCS group size is the one set);
// `hosts`: hosts the world spans (1 = one).
std::vector<Candidate> composition_grid(const JobSettings& job, int hosts);

// Variants of `around` (whose settings are `job`) with one knob changed; `hosts`: hosts the world
// spans (1 = one).
std::vector<Candidate> compositions_around(const JobSettings& job, const Candidate& around,
                                           int hosts);

// The offload placement a grid composition sets: "none", "optimizer offload_cpu", ...: the grid's
// compositions that differ only in it are one (stage, micro batch, MiCS) cell.
std::string placement_of(const Candidate& c);
// The composition without its placement: the cell it belongs to.
std::string cell_of(const Candidate& c);

}  // namespace zt::trainer
