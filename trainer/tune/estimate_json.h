// An estimate as JSON: `trainer estimate --json` prints a list of them, tune.json holds one per
// candidate. Every byte count per rank, the multipliers of psi (parameters) the model states
// follow, the collectives with their links, the offload traffic and the fit.
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "tune/composition_estimate.h"

namespace zt::trainer {

nlohmann::json estimate_json(const CompositionEstimate& e);

}  // namespace zt::trainer
