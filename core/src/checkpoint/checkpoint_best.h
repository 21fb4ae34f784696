// Which checkpoint is the best (CheckpointOptions::keep_best): the complete one whose manifest
// records the lowest value of the metric, named by dir/best so that pruning spares it.
// Thread safety: free functions; only rank 0's writer thread publishes and calls them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zt::ckpt {

// The metric `name` the manifest of `folder` records; none when it records none, or the
// manifest cannot be read.
std::optional<double> recorded_metric(const std::string& folder, const std::string& name);

// After publishing step `published`: the complete checkpoint under `dir` with the lowest `metric`
// (the earlier step on a tie) among steps up to `published`, written to dir/best when it
// changed. Later steps are another run's (this one started afresh or from an older step in
// the folder), as pruning counts them: chosen, `best` named another run's weights and this
// run's own best was pruned as an old one. Returns its path, "" when no checkpoint records the
// metric. Throws IoError when dir/best cannot be written.
std::string update_best(const std::string& dir, const std::string& metric, int64_t published);

}  // namespace zt::ckpt
