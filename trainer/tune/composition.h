// A candidate composition of the user's job: the --set overrides that make it (stage, shard
// strategy and buckets, micro batch x grad_accum, prefetch, persistence, offload placement and
// tiers, MiCS group), what `trainer estimate` sizes and `trainer tune` races. Its label says what
// it runs.
// Thread safety: plain values and pure functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "settings/job_settings.h"
#include "zt/host/config.h"

namespace zt::trainer {

struct Candidate {
  std::vector<std::string> overrides;  // section.key=value, applied after the user's
  std::string label;                   // composition_label of its config
  std::string origin;                  // "grid", "around the leader", "--candidate", "your config"
};

// The user's job with overrides applied (their file, their --set, then these): a ConfigError for
// a combination the config's rules refuse.
using ConfigLoader = std::function<Config(const std::vector<std::string>& overrides)>;

// "stage 2, shard_bucket, micro 8 x accum 1, no offload"; knobs that matter at that stage
// follow ("bucket 25 MiB", "prefetch 1", "persist < 100000", "optimizer 100% offload_nvme",
// "params 50% offload_cpu", "sub_group 262144", "queue 8", "bf16 states", "MiCS 4").
std::string composition_label(const JobSettings& job);

// Whether the job's optimizer declares option `key` and sets it to "bf16": optim_hybrid_adam's
// 16-bit knobs ("state_dtype", "master_dtype"), which tune races and labels by these names.
bool optimizer_option_is_bf16(const EngineSettings& engine, const char* key);

// A number as a label or an override spells it: "4", "0.5", "1e+09".
std::string short_number(double v);

// The value `key` ("zero.stage", "plugin.shard_bucket.bucket_mb", "codec.gradients.bits") has in
// `config`, as TOML. Throws (zt::Error) for a key the config does not have.
std::string config_value(const Config& config, const std::string& key);

}  // namespace zt::trainer
