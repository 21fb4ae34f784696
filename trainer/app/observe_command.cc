#include "app/observe_command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "report/run_metrics.h"
#include "report/run_report.h"
#include "zt/error.h"
#include "zt/host/flight_diagnosis.h"

namespace zt::trainer {

namespace {

namespace fs = std::filesystem;

// <dir>/rank-N.json files, by rank.
std::vector<std::pair<int, std::string>> rank_files(const std::string& dir) {
  std::vector<std::pair<int, std::string>> out;
  std::error_code ec;
  const std::regex name("rank-([0-9]+)\\.json");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, name)) out.push_back({std::stoi(m[1]), entry.path().string()});
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int run_trace_merge(const CliArgs& cli, std::ostream& out) {
  const std::string run_dir = cli.compare_runs.at(0);
  std::string dir = run_dir + "/trace";
  if (!fs::is_directory(dir)) dir = run_dir;
  const auto files = rank_files(dir);
  if (files.empty()) {
    throw ConfigError("no rank-N.json trace files in " + dir +
                      "; run the job with [trace] enabled = true (trace.dir sets the folder)");
  }
  nlohmann::json merged;
  merged["traceEvents"] = nlohmann::json::array();
  merged["displayTimeUnit"] = "ms";
  merged["otherData"]["ranks"] = nlohmann::json::array();
  // The world of the first file read, and that file: every file must be of one job.
  int64_t world = -1;
  std::string world_path;
  for (const auto& [rank, path] : files) {
    std::ifstream in(path);
    nlohmann::json j;
    try {
      in >> j;
    } catch (const std::exception& e) {
      throw ConfigError(path + " is not a trace file zt wrote (" + e.what() + ")");
    }
    // A rerun in the same out_dir with fewer ranks leaves the old run's higher ranks behind.
    const nlohmann::json other = j.value("otherData", nlohmann::json::object());
    if (other.is_object() && other.contains("world") && other["world"].is_number_integer()) {
      const int64_t w = other["world"].get<int64_t>();
      if (world < 0) {
        world = w;
        world_path = path;
      }
      if (w != world || rank >= w) {
        throw ConfigError(path + " is of a " + std::to_string(w) + "-rank job and " + world_path +
                          " of a " + std::to_string(world) +
                          "-rank one: the folder holds traces of two runs; remove the older "
                          "run's files (or give each run its own trace.dir)");
      }
    }
    // Each rank's file is its own process already (pid = rank); its events go in as they are.
    for (auto& e : j["traceEvents"]) merged["traceEvents"].push_back(std::move(e));
    merged["otherData"]["ranks"].push_back(j.value("otherData", nlohmann::json::object()));
  }
  const std::string target = cli.out_path.empty() ? dir + "/merged.json" : cli.out_path;
  std::ofstream file(target);
  file << merged.dump() << "\n";
  if (!file.flush()) throw IoError("cannot write " + target + " (is the disk full?)");
  out << "trace: " << files.size() << " rank(s) merged into " << target
      << " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  return 0;
}

int run_flight(const CliArgs& cli, std::ostream& out) {
  const std::string dir = cli.compare_runs.at(0) + "/flight";
  const auto files = rank_files(dir);
  if (files.empty()) {
    throw ConfigError("no flight records (rank-N.json) in " + dir +
                      "; ranks write them on a failure, a hang past launch.timeout_s, or "
                      "SIGUSR2 (kill -USR2 <pid of each rank>)");
  }
  // The job's size as its ranks recorded it: the highest file present missed the ranks that died
  // without one (the likely culprits), and took in an earlier, larger job's leftovers.
  int64_t world = -1;
  std::string world_path;
  for (const auto& [rank, path] : files) {
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("world") || !j["world"].is_number_integer()) continue;
    const int64_t w = j["world"].get<int64_t>();
    if (world < 0) {
      world = w;
      world_path = path;
    }
    if (w != world || rank >= w) {
      throw ConfigError(path +
                        (w != world
                             ? " is of a " + std::to_string(w) + "-rank job and " + world_path +
                                   " of a " + std::to_string(world) + "-rank one"
                             : " names rank " + std::to_string(rank) + ", past its " +
                                   std::to_string(w) + "-rank job") +
                        ": the folder holds flight records of two runs; remove the older run's "
                        "files");
    }
  }
  if (world < 0) {
    throw ConfigError("no readable flight record in " + dir + " (" + files.front().second +
                      " and the others are not a rank's record): nothing to diagnose");
  }
  out << "flight record: " << diagnose_flight(dir, static_cast<int>(world)).line << "\n";
  return 0;
}

int run_report(const CliArgs& cli, std::ostream& out) {
  const std::string run_dir = cli.compare_runs.at(0);
  std::string target = cli.out_path;
  if (target.empty()) {
    // Beside the metrics (RUN_DIR may name metrics.jsonl itself). A live A/B job's report.html is
    // its A/B report: the run report goes to run-report.html, as the job's own end writes it.
    std::string folder = run_dir;
    if (!std::filesystem::is_directory(run_dir)) {
      folder = std::filesystem::path(run_dir).parent_path().string();
      if (folder.empty()) folder = ".";
    }
    const bool live_ab = !read_run_metrics(run_dir).arm_overrides.empty();
    target = folder + (live_ab ? "/run-report.html" : "/report.html");
  }
  write_run_report(run_dir, target);
  out << "report: " << target << "\n";
  return 0;
}

}  // namespace zt::trainer
