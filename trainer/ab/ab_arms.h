// The arms of an A/B comparison: each a list of --set overrides of the user's job ("plugins.
// shard=shard_bucket,plugin.shard_bucket.bucket_mb=50"), and which of the keys the arms set
// differently may change the math. Keys that only move where bytes live or how they travel
// (the shard plugin and its options, stage, buckets, prefetch, offload, comm, launch) must give
// the same losses; any other key (model, data, precision, seed, schedule, the optimizer's
// options, gradient clipping) may not, and an A/B across it is refused for the agreement check.
// Thread safety: free functions of their inputs.
#pragma once

#include <string>
#include <vector>

namespace zt::trainer {
struct JobSettings;
}

namespace zt::trainer {

struct Arm {
  std::string name;                    // "A" or "B", or what the report calls it
  std::vector<std::string> overrides;  // section.key=value, in order
};

// Splits "k=v,k=v" at the commas outside brackets and quotes (a value may be a TOML array:
// betas=[0.9,0.95]). Throws ConfigError naming the flag when an item has no '=' or no key.
Arm parse_arm(const std::string& name, const std::string& text, const std::string& flag);

// The keys the two arms set to different values (a key only one arm sets counts), in order.
std::vector<std::string> differing_keys(const Arm& a, const Arm& b);

// How a job of micro steps in 16-bit compute rounds its reduced gradients: stages 0-1 sum the
// micro steps in fp32 and reduce the sum once ("once"), stages 2-3 reduce each micro step in the
// compute dtype ("per micro step"); "" for fp32 or one micro step, where the stage leaves them
// alone. Arms on either side of it (stage 1 against stage 2) train other losses.
const char* gradient_reduction(const JobSettings& job);
bool reductions_round_apart(const JobSettings& a, const JobSettings& b);

// Whether `key` ("section.key" or "plugin.<id>.option") can change the losses. `optimizer_ids`:
// the optimizer plugin ids of the arms (its options are math). `layout_is_math`: an arm's
// layout moves its values (layout_changes_math), so only where bytes are kept and when they
// travel (offload, prefetch, overlap, the bytes in flight) stay neutral.
bool changes_math(const std::string& key, const std::vector<std::string>& optimizer_ids,
                  bool layout_is_math = false);
// changes_math() for a key two arms `a` and `b` set apart, and zero.stage where their stages
// round the reduced gradients apart (reductions_round_apart): what trainer ab and a live A/B
// count as math.
bool changes_math_between(const std::string& key, const std::vector<std::string>& optimizer_ids,
                          bool layout_is_math, const JobSettings& a, const JobSettings& b);
// Whether the job codes a collective (a codec chosen for the weights or the gradients).
bool codes_collectives(const JobSettings& job);
// Whether the job's layout (stage, MiCS groups, persistence, shard plugin and its buckets) is
// part of its math: a codec's (which collectives are coded, where its blocks start), or an
// optimizer that keeps a state or its masters in 16 bits (an option of it set to "bf16" or
// "fp16", as optim_hybrid_adam's state_dtype and master_dtype) and may round to them
// stochastically, keying each element's random bits on its place in its group, which the shard
// layout sets. An option X_dtype whose X_rounding is "nearest" rounds the same in any layout.
bool layout_changes_math(const JobSettings& job);

// A short label of an arm for reports: its overrides' values joined ("shard_bucket"), a number
// or a boolean with its key's last part ("stage=3", "shared_memory=false"); "baseline" for none.
std::string arm_label(const Arm& arm);

}  // namespace zt::trainer
