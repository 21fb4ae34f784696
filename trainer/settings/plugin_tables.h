// A [plugin.<id>] table is checked against the options its plugin declares, and a misspelled id
// is refused; but a table for an installed plugin that no role of [plugins] selects was read and
// then dropped without a word (a user who wrote [plugin.offload_cpu] options while the states go
// to offload_nvme trains without them). The config's first load warns about each.
// Not an error: one config serves several arms (`trainer ab --b plugins.shard=shard_tensor`,
// [ab] arms, tune's candidates), each of which selects a plugin the base job does not, and a
// resolved config prints every table the user wrote. So no warning for a table of a plugin an
// [ab] arm names, nor for tables of a kind whose role --set chose (a test or a benchmark
// switching plugins over one file); `trainer ab`, tune and estimate ask for none at all
// (job_config.h's kJobHasArmsVariable). Only the file's keys count: not a DeepSpeed
// config's, nor --set's, which scripts give whether or not the job selects the plugin
// (plugin.offload_nvme.path=/scratch/..., wherever a tier may be made).
// Thread safety: a free function.
#pragma once

#include <string>
#include <vector>

#include "zt/host/config.h"

namespace zt::trainer {

// One line per [plugin.<id>] table with a key the file set whose plugin no role selects (but
// the exceptions above): its place, what the plugin is, the roles that could select it, and the
// way out. Empty when every such table is read.
std::vector<std::string> unused_plugin_tables(const Config& config);

}  // namespace zt::trainer
