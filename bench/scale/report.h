// zt_bench_scale's tables and JSON: one row per job (parameters, model states in all tiers, host
// RAM measured and estimated, peak RSS per rank, bytes on disk, step time, tokens/s, loss), the
// time of a step by part, the tier bytes per parameter against the composition's minimum and
// the step against the disk's bound, and the depth table (peak RSS per rank against the shallowest
// model's, at fixed width).
// Thread safety: pure functions, plus file output.
#pragma once

#include <string>
#include <vector>

#include "bench_scale.h"

namespace zt::bench {

// The target for the depth table: 48 blocks within this factor of 12 blocks' peak RSS.
constexpr double kMaxDepthRssRatio = 1.3;

// The target for a step against its bounds: at most this times max(compute, disk).
constexpr double kMaxStepOverBound = 1.25;

void print_report(const std::vector<ScaleRow>& rows, const DiskBounds& disk);
void write_json(const std::vector<ScaleRow>& rows, const DiskBounds& disk, const std::string& path,
                double total_s);

}  // namespace zt::bench
