// Integers from JSON files others make (metrics.jsonl, checkpoint manifests). JSON allows any
// number where zt writes an integer, and the JSON library's get<int64_t>() of a float outside
// int64's range is undefined behaviour (tests/fuzz's metrics target found 4.192e+57 in a memory
// field). A reader takes its integer fields through json_integer, which says whether the value is
// an integer that fits; its real fields through json_real, which reads the null a writer puts for
// a non-finite value (metrics.jsonl's loss of a diverged step) as NaN. Templated on the JSON type,
// so this header needs no JSON library.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

namespace zt {

// `v` as an Int when it is a JSON integer within Int's range; nullopt for anything else (a float,
// even a whole one, a string, an integer out of range).
template <typename Int, typename Json>
std::optional<Int> json_integer(const Json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.template get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<Int>::max())) return std::nullopt;
    return static_cast<Int>(u);
  }
  if (!v.is_number_integer()) return std::nullopt;
  const int64_t i = v.template get<int64_t>();
  if constexpr (std::numeric_limits<Int>::is_signed) {
    if (i < static_cast<int64_t>(std::numeric_limits<Int>::min()) ||
        i > static_cast<int64_t>(std::numeric_limits<Int>::max()))
      return std::nullopt;
  } else {
    if (i < 0 || static_cast<uint64_t>(i) > std::numeric_limits<Int>::max()) return std::nullopt;
  }
  return static_cast<Int>(i);
}

// The largest count (steps, samples) a file may hold: the increments a run adds to it cannot
// overflow int64.
inline constexpr int64_t kMaxJsonCount = int64_t{1} << 62;

// `v` as a count when it is a JSON integer from 0 to kMaxJsonCount; nullopt for anything else (a
// negative step was saved under a name no reader reads back, a float read as undefined behaviour).
template <typename Json>
std::optional<int64_t> json_count(const Json& v) {
  const std::optional<int64_t> n = json_integer<int64_t>(v);
  if (!n || *n < 0 || *n > kMaxJsonCount) return std::nullopt;
  return n;
}

// `v` as a double when it is a JSON number, NaN when it is null (JSON has no NaN or infinity: a
// writer puts null for them); nullopt for anything else.
template <typename Json>
std::optional<double> json_real(const Json& v) {
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!v.is_number()) return std::nullopt;
  return v.template get<double>();
}

}  // namespace zt
