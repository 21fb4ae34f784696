// Reading the trace and flight-record files a job wrote (Chrome trace event JSON), for the tests
// of what they hold.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../test_util.h"

namespace zt::test {

inline nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(read_file(path));
}

// The "X" events of each thread of a trace file, by lane name.
inline std::map<std::string, std::vector<nlohmann::json>> lanes_of(const nlohmann::json& trace) {
  std::map<int, std::string> names;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names[e["tid"]] = e["args"]["name"];
  }
  std::map<std::string, std::vector<nlohmann::json>> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") out[names[e["tid"]]].push_back(e);
  }
  return out;
}

}  // namespace zt::test
