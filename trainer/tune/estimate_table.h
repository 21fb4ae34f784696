// `trainer estimate`'s table: one line per composition (status, the expected peak and the fit
// total, host RAM by category, bytes per parameter, file-tier bytes, bytes sent per step by
// collective, links), then what does not fit, what the estimate pruned and what the config
// refused, and why.
// Thread safety: a free function of its inputs.
#pragma once

#include <ostream>
#include <vector>

#include "tune/composition_estimate.h"

namespace zt::trainer {

void print_estimates(const std::vector<CompositionEstimate>& estimates,
                     const EstimateOptions& options, std::ostream& out);

}  // namespace zt::trainer
