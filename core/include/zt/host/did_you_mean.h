// Suggestions for misspelled names (keys, sections, plugin ids) in error messages.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "zt/api.h"

namespace zt {

// The candidate closest to `word` by edit distance, if close enough to be a plausible typo
// (distance <= max(2, len/3)); empty otherwise.
ZT_API std::string closest_match(const std::string& word,
                                 const std::vector<std::string>& candidates);
// " (did you mean 'x'?)" or "" — ready to append to a message.
ZT_API std::string did_you_mean(const std::string& word,
                                const std::vector<std::string>& candidates);

}  // namespace zt
