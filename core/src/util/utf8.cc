// Well-formedness per the Unicode standard's Table 3-7, which the WHATWG decoder implements: the
// second byte's range depends on the lead byte (E0, ED, F0 and F4 narrow it), which is what
// rules out overlong forms, surrogates and code points past U+10FFFF.
#include "zt/host/utf8.h"

#include <cstdint>

namespace zt {

namespace {

// How many bytes a sequence led by `lead` has (0 for a byte that cannot lead one), and the
// range its second byte must fall in.
struct Lead {
  int length;
  uint8_t second_low;
  uint8_t second_high;
};

Lead lead_of(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// The length of the well-formed sequence at `at`, or -k for an ill-formed one whose maximal
// subpart is k bytes (k >= 1). `truncated` is set when the bytes ran out inside a sequence.
int sequence_at(std::string_view s, size_t at, bool* truncated = nullptr) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const Lead lead = lead_of(byte(at));
  if (lead.length == 1) return 1;
  if (lead.length == 0) return -1;
  for (int i = 1; i < lead.length; ++i) {
    if (at + i >= s.size()) {
      if (truncated) *truncated = true;
      return -i;
    }
    const uint8_t b = byte(at + i);
    const bool ok = i == 1 ? (b >= lead.second_low && b <= lead.second_high)
                           : (b >= 0x80 && b <= 0xBF);
    if (!ok) return -i;
  }
  return lead.length;
}

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    // ASCII runs are most text: skip eight at a time while no byte has its top bit set.
    while (i + 8 <= bytes.size()) {
      uint64_t word;
      __builtin_memcpy(&word, bytes.data() + i, 8);
      if (word & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= bytes.size()) break;
    const int n = sequence_at(bytes, i);
    if (n < 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

std::string replace_invalid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const int n = sequence_at(bytes, i);
    if (n > 0) {
      out.append(bytes.data() + i, static_cast<size_t>(n));
      i += static_cast<size_t>(n);
    } else {
      out.append("\xEF\xBF\xBD");
      i += static_cast<size_t>(-n);
    }
  }
  return out;
}

size_t complete_utf8_prefix(std::string_view bytes) {
  // A sequence is at most 4 bytes, so only a lead among the last 3 can start an unfinished one.
  for (size_t at = bytes.size() > 3 ? bytes.size() - 3 : 0; at < bytes.size(); ++at) {
    if (lead_of(static_cast<uint8_t>(bytes[at])).length < 2) continue;
    bool truncated = false;
    if (sequence_at(bytes, at, &truncated) < 0 && truncated) return at;
  }
  return bytes.size();
}

}  // namespace zt
