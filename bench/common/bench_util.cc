#include "common/bench_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "zt/error.h"

namespace zt::bench {

double median(std::vector<double> values) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t m = values.size() / 2;
  return values.size() % 2 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

int64_t parse_positive(const std::string& text, const std::string& flag, const char* usage) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v <= 0) {
    throw ConfigError(flag + " takes positive integers, got '" + text + "'\n" + usage);
  }
  return v;
}

std::vector<int64_t> parse_positive_list(const std::string& list, const std::string& flag,
                                         const char* usage) {
  std::vector<int64_t> values;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    values.push_back(parse_positive(list.substr(start, comma - start), flag, usage));
    start = comma + 1;
  }
  return values;
}

int bench_main(const std::string& name, int argc, char** argv,
               int (*run)(const std::vector<std::string>&)) {
  try {
    return run(std::vector<std::string>(argv, argv + argc));
  } catch (const zt::Error& e) {
    std::fprintf(stderr, "%s: %s error: %s\n", name.c_str(), e.kind_name(), e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
    return 1;
  }
}

}  // namespace zt::bench
