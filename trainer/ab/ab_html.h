// report.html of an A/B comparison: one self-contained file (inline SVG drawn here, no network
// and no library at view time) with the verdict, a table per arm and six charts: step time per
// step for both arms, their step-time distributions, memory by category per rank, collective
// calls and bytes per step, and the loss curves overlaid. A few lines of script check, in the
// browser that shows it, that every chart drew its marks, and say so at the foot of the page (the
// headless Chromium test reads that). Thread safety: free functions of their inputs.
#pragma once

#include <string>

#include "ab/ab_report.h"

namespace zt::trainer {

std::string ab_html(const AbResult& r);

// Writes ab_html(r) to `path` (write_report_file). Throws IoError.
void write_ab_html(const AbResult& r, const std::string& path);

}  // namespace zt::trainer
