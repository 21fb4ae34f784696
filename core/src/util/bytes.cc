#include "zt/bytes.h"

#include <cstdio>

namespace zt {

namespace {

std::string format(const char* pattern, double value) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), pattern, value);
  return buf;
}

}  // namespace

std::string mib_text(double bytes) { return format("%.1f MiB", bytes / kMiB); }

std::string gib_text(double bytes) { return format("%.2f GiB", bytes / kGiB); }

std::string size_text(int64_t bytes) {
  if (bytes < kKiB) return std::to_string(bytes) + " B";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / kKiB;
  int unit = 0;
  // 1023.95 and up would print as "1024.0": that is the next unit's 1.0.
  while (value >= 1023.95 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  return format("%.1f ", value) + kUnits[unit];
}

std::string bytes_text(int64_t bytes) {
  std::string text = std::to_string(bytes) + " bytes";
  if (bytes < kKiB) return text;
  return text + " (" + size_text(bytes) + ")";
}

}  // namespace zt
