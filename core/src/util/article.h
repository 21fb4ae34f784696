// English for messages: a noun with its indefinite article ("an integer", "a number", "an
// offload plugin"). The nouns zt puts in messages are plain words, so the first letter decides.
#pragma once

#include <string>

namespace zt {

inline std::string with_article(const std::string& noun) {
  const bool vowel = !noun.empty() && std::string("aeiouAEIOU").find(noun[0]) != std::string::npos;
  return (vowel ? "an " : "a ") + noun;
}

}  // namespace zt
