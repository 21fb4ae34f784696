// zt/bytes.h: rounding sizes up to a multiple, and how sizes are spelled for people.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

#include "zt/bytes.h"

TEST_CASE("round_up: the smallest multiple that holds n, at the edges") {
  CHECK(zt::round_up(0, 4096) == 0);
  CHECK(zt::round_up(1, 4096) == 4096);
  CHECK(zt::round_up(4095, 4096) == 4096);
  CHECK(zt::round_up(4096, 4096) == 4096);
  CHECK(zt::round_up(4097, 4096) == 8192);
  CHECK(zt::round_up(7, 1) == 7);
  // Not only powers of two: a world size of 3 times an alignment.
  CHECK(zt::round_up(10, 3) == 12);
  CHECK(zt::round_up(12, 3) == 12);
  // Near the top of int64 (the REQUIRES bound: n + multiple fits).
  const int64_t big = std::numeric_limits<int64_t>::max() - 4096;
  CHECK(zt::round_up(big, 4096) % 4096 == 0);
  CHECK(zt::round_up(big, 4096) >= big);
  // The defining properties over a range of sizes and multiples.
  for (int64_t m : {1, 2, 3, 7, 64, 4096}) {
    for (int64_t n = 0; n < 3 * m + 2; ++n) {
      const int64_t r = zt::round_up(n, m);
      CHECK(r % m == 0);
      CHECK(r >= n);
      CHECK(r - n < m);
    }
  }
  static_assert(zt::round_up(5, 4) == 8, "usable in constant expressions");
}

TEST_CASE("mib_text and gib_text keep one unit, so columns compare") {
  CHECK(zt::mib_text(0) == "0.0 MiB");
  CHECK(zt::mib_text(3 * zt::kMiB + 5) == "3.0 MiB");
  CHECK(zt::mib_text(3.05 * zt::kMiB + 100) == "3.1 MiB");
  CHECK(zt::mib_text(1.5 * zt::kMiB) == "1.5 MiB");
  CHECK(zt::mib_text(2.5 * zt::kGiB) == "2560.0 MiB");
  CHECK(zt::mib_text(100) == "0.0 MiB");
  CHECK(zt::gib_text(1.5 * zt::kGiB) == "1.50 GiB");
  CHECK(zt::gib_text(zt::kMiB) == "0.00 GiB");
  CHECK(zt::gib_text(64.0 * zt::kGiB) == "64.00 GiB");
}

TEST_CASE("size_text picks the unit that keeps the number at 1 or more") {
  CHECK(zt::size_text(0) == "0 B");
  CHECK(zt::size_text(1023) == "1023 B");
  CHECK(zt::size_text(1024) == "1.0 KiB");
  CHECK(zt::size_text(1536) == "1.5 KiB");
  CHECK(zt::size_text(3 * zt::kMiB + 5) == "3.0 MiB");
  CHECK(zt::size_text(5 * zt::kGiB / 2) == "2.5 GiB");
  CHECK(zt::size_text(int64_t{3} << 40) == "3.0 TiB");
  // Just under a unit would print "1024.0" of the smaller one: it is the next unit's 1.0.
  CHECK(zt::size_text(zt::kMiB - 1) == "1.0 MiB");
  CHECK(zt::size_text(zt::kMiB - 60) == "1023.9 KiB");
  CHECK(zt::size_text(std::numeric_limits<int64_t>::max()) == "8.0 EiB");
  CHECK(zt::size_text(-5) == "-5 B");
}

TEST_CASE("bytes_text is exact, with a readable size from 1 KiB") {
  CHECK(zt::bytes_text(0) == "0 bytes");
  CHECK(zt::bytes_text(1023) == "1023 bytes");
  CHECK(zt::bytes_text(4096) == "4096 bytes (4.0 KiB)");
  CHECK(zt::bytes_text(3 * zt::kMiB + 5) == "3145733 bytes (3.0 MiB)");
  CHECK(zt::bytes_text(2 * zt::kMiB) == "2097152 bytes (2.0 MiB)");
}
