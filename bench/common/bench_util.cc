#include "common/bench_util.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "report/report_file.h"
#include "run/stop_signals.h"
#include "zt/error.h"
#include "zt/host/blas.h"

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

bool next_option(const std::vector<std::string>& args, size_t& i,
                 const std::vector<std::string>& known, const char* usage, std::string& flag,
                 std::string& value) {
  const std::string& arg = args[i];
  if (arg == "-h" || arg == "--help") return false;
  const size_t eq = arg.find('=');
  flag = arg.substr(0, eq);
  if (std::find(known.begin(), known.end(), flag) == known.end()) {
    throw ConfigError("unknown option '" + flag + "'\n" + usage);
  }
  if (eq != std::string::npos) {
    value = arg.substr(eq + 1);
  } else if (i + 1 < args.size()) {
    value = args[++i];
  } else {
    throw ConfigError(flag + " needs a value\n" + usage);
  }
  return true;
}

namespace {

// The core a rank started by zt runs: the user's choice, else zt's, else OpenBLAS's own.
std::string ranks_core(const BlasInfo& info) {
  if (!info.user_core.empty()) return info.core;
  return info.recommended.empty() ? info.core : info.recommended;
}

// Who chose the core this process runs.
const char* core_chosen_by(const BlasInfo& info) {
  if (!info.user_core.empty()) return "environment";
  return info.detected.empty() ? "OpenBLAS" : "zt";
}

}  // namespace

std::string blas_line() {
  const BlasInfo info = probe_blas();
  if (info.library.empty()) return blas_header_line(info);
  std::string line = "BLAS: " + info.library + " core " + info.core;
  if (!info.user_core.empty()) line += " (OPENBLAS_CORETYPE from your environment)";
  if (ranks_core(info) != info.core) line += "; the ranks zt starts run " + ranks_core(info);
  return line;
}

std::string blas_json() {
  const BlasInfo info = probe_blas();
  return "\"blas\": {\"library\": " + json_string(info.library) +
         ", \"core\": " + json_string(info.core) +
         ", \"chosen_by\": " + json_string(info.library.empty() ? "" : core_chosen_by(info)) +
         ", \"ranks_core\": " + json_string(ranks_core(info)) + "}";
}

void ResultsFile::commit() {
  // A stop during work the bench does itself (kernels, tables): no results of a run cut short.
  stop_if_signalled("finishing its results, " + path_);
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) {
    throw IoError("cannot create " + parent.string() + ", the folder of " + path_ + " (" +
                  ec.message() + "); pass --json a path this user can write");
  }
  trainer::write_report_file(path_, str(), "; check the folder or pass --json");
}

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) throw IoError("cannot create " + tmpl);
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void stop_on_signals() { trainer::catch_stop_signals(); }

void stop_if_signalled(const std::string& doing) {
  if (const int sig = trainer::stop_signal_received()) {
    throw trainer::StoppedBySignal(sig,
                                   "the bench stopped while " + doing +
                                       "; its scratch folders are removed, no results written");
  }
}

int bench_main(const std::string& name, int argc, char** argv,
               int (*run)(const std::vector<std::string>&)) {
  try {
    return run(std::vector<std::string>(argv, argv + argc));
  } catch (const trainer::StoppedBySignal& e) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
    return 128 + e.signal();
  } catch (const zt::Error& e) {
    std::fprintf(stderr, "%s: %s error: %s\n", name.c_str(), e.kind_name(), e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
    return 1;
  }
}

}  // namespace zt::bench
