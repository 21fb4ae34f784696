// Byte counts: rounding a size up to a multiple (padding to a world size, a page, an O_DIRECT
// block) and spelling sizes for people, the same way in the core, the plugins, the trainer and
// the benchmarks.
// Thread safety: pure functions; call from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "zt/api.h"

namespace zt {

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

// The smallest multiple of `multiple` that is >= n. REQUIRES n >= 0, multiple > 0 and
// n + multiple <= INT64_MAX; unchecked, since it sits on I/O and layout paths.
constexpr int64_t round_up(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// "3.0 MiB": one decimal, always in MiB, so the columns of a table compare at a glance.
ZT_API std::string mib_text(double bytes);
// "1.50 GiB": two decimals, always in GiB (host-sized amounts).
ZT_API std::string gib_text(double bytes);
// "512 B", "4.0 KiB", "3.0 MiB", "1.5 GiB", "2.0 TiB": the largest unit that keeps the number
// at 1 or more, one decimal; plain bytes under 1 KiB (and for negative counts).
ZT_API std::string size_text(int64_t bytes);
// "3145733 bytes (3.0 MiB)": exact for checking, readable for people; "100 bytes" under 1 KiB.
ZT_API std::string bytes_text(int64_t bytes);

}  // namespace zt
