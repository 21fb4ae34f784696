// zt_bench_ckpt's table and JSON: per configuration the checkpoint's size, the synchronous save
// against dd's direct-I/O bandwidth on the same folder, the asynchronous save's stall against a
// memory copy of the rank's bytes and against the synchronous save, the load, and for offloaded
// states the peak RSS a save adds against the tier's buffers.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "bench_ckpt.h"

namespace zt::bench {

void print_report(const std::vector<CkptResult>& results);
void write_json(const std::vector<CkptResult>& results, const std::string& path);

}  // namespace zt::bench
