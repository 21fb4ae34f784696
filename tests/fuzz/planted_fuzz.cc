// Planted faults, not a parser: an input that starts "oob" is read one byte past its end, one
// that starts "overflow" overflows a signed integer, as a parser with an off-by-one or an
// unchecked length would. Built only with the sanitizers (scripts/fuzz-replay.sh), where each of
// its two reproducers must fail the replay with the sanitizer's report: a replay that lost its
// sanitizers would pass them, and the real targets' reproducers with them.
#include <cstdint>
#include <cstring>
#include <limits>

#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 3 && std::memcmp(data, "oob", 3) == 0) {
    volatile uint8_t past_the_end = data[size];
    (void)past_the_end;
  }
  if (size >= 8 && std::memcmp(data, "overflow", 8) == 0) {
    volatile int near_max = std::numeric_limits<int>::max() - static_cast<int>(size) + 9;
    volatile int over = near_max + static_cast<int>(size);
    (void)over;
  }
  return 0;
}
