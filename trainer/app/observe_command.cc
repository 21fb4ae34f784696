#include "app/observe_command.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <utility>

#include "report/report_file.h"
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
  fs::directory_iterator entries(dir, ec);
  // A folder that exists but cannot be read is not one without files: the advice to run the job
  // again would be wrong.
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw IoError("cannot list " + dir + " (" + ec.message() +
                  "); make it readable, or give the run's folder or its trace folder");
  }
  for (const auto& entry : entries) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, name)) continue;
    int rank = -1;
    const std::string digits = m[1];
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
    if (error != std::errc() || end != digits.data() + digits.size()) {
      throw ConfigError(entry.path().string() +
                        " is named for a rank no job has; remove it (zt names its files "
                        "rank-0.json, rank-1.json, ...)");
    }
    out.push_back({rank, entry.path().string()});
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The files of one folder must be one job's: the world the first file with one recorded, and
// each rank below it. A rerun with fewer ranks, or a requeued job's earlier run, leaves files
// that would otherwise be read as this job's.
class OneJobsFiles {
 public:
  //   kind:      "traces", "flight records" (the message's words).
  //   way_out:   what to do beyond removing the older run's files ("" for nothing more).
  OneJobsFiles(std::string kind, std::string way_out)
      : kind_(std::move(kind)), way_out_(std::move(way_out)) {}

  // Takes rank `rank`'s file `path`, which recorded a job of `world` ranks. Throws ConfigError
  // naming both files when the folder holds two jobs' files.
  void take(int rank, const std::string& path, int64_t world) {
    // Each rank's file is looked for: a damaged "world" must not have a billion opened.
    if (world > (int64_t{1} << 20)) {
      throw ConfigError(path + " says the job had " + std::to_string(world) +
                        " ranks, more than any job zt starts (2^20): the file is damaged; give "
                        "the folder of a run whose " +
                        kind_ + " are whole");
    }
    if (world_ < 0) {
      world_ = world;
      first_path_ = path;
    }
    if (world == world_ && rank < world) return;
    throw ConfigError(
        path +
        (world != world_ ? " is of a " + std::to_string(world) + "-rank job and " + first_path_ +
                               " of a " + std::to_string(world_) + "-rank one"
                         : " names rank " + std::to_string(rank) + ", past its " +
                               std::to_string(world) + "-rank job") +
        ": the folder holds " + kind_ + " of two runs; remove the older run's files" + way_out_);
  }
  // The job's world, or -1 when no file recorded one.
  int64_t world() const { return world_; }

 private:
  std::string kind_;
  std::string way_out_;
  int64_t world_ = -1;
  std::string first_path_;
};

}  // namespace

int run_trace_merge(const CliArgs& cli, std::ostream& out) {
  const std::string run_dir = cli.compare_runs.at(0);
  std::string dir = run_dir + "/trace";
  std::error_code ec;  // an unreadable folder is rank_files' to name, not an internal error
  if (!fs::is_directory(dir, ec)) dir = run_dir;
  const auto files = rank_files(dir);
  if (files.empty()) {
    throw ConfigError("no rank-N.json trace files in " + dir +
                      "; run the job with [trace] enabled = true (trace.dir sets the folder)");
  }
  nlohmann::json merged;
  merged["traceEvents"] = nlohmann::json::array();
  merged["displayTimeUnit"] = "ms";
  merged["otherData"]["ranks"] = nlohmann::json::array();
  OneJobsFiles job("traces", " (or give each run its own trace.dir)");
  nlohmann::json origin;  // the first file's clock origin
  std::string origin_path;
  for (const auto& [rank, path] : files) {
    std::ifstream in(path);
    if (!in) {
      throw IoError("cannot read " + path + " (" + std::strerror(errno) + "); make it readable");
    }
    nlohmann::json j;
    try {
      in >> j;
    } catch (const std::exception& e) {
      throw ConfigError(path + " is not a trace file zt wrote (" + e.what() + ")");
    }
    // Valid JSON of another kind (a flight record, `[]`) merged nothing or threw out of here.
    if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array()) {
      throw ConfigError(path + " is not a trace file zt wrote (no traceEvents array); give the " +
                        "run's folder or its trace folder (trace.dir)");
    }
    // A rerun in the same out_dir with fewer ranks leaves the old run's higher ranks behind.
    const nlohmann::json other = j.value("otherData", nlohmann::json::object());
    if (other.is_object() && other.contains("world") && other["world"].is_number_integer())
      job.take(rank, path, other["world"].get<int64_t>());
    // A rerun of the same size leaves the ranks whose trace it did not write: the clock origin
    // its ranks measured together tells them apart.
    if (other.is_object() && other.contains("clock_origin_ns")) {
      if (origin.is_null()) {
        origin = other["clock_origin_ns"];
        origin_path = path;
      } else if (other["clock_origin_ns"] != origin) {
        throw ConfigError(path + " and " + origin_path +
                          " are of two runs (their clock origins differ): the folder holds "
                          "traces of two runs; remove the older run's files (or give each run "
                          "its own trace.dir)");
      }
    }
    // Each rank's file is its own process already (pid = rank); its events go in as they are.
    for (auto& e : j["traceEvents"]) merged["traceEvents"].push_back(std::move(e));
    merged["otherData"]["ranks"].push_back(j.value("otherData", nlohmann::json::object()));
  }
  const std::string target = cli.out_path.empty() ? dir + "/merged.json" : cli.out_path;
  write_report_file(target, merged.dump() + "\n");
  out << "trace: " << files.size() << " rank(s) merged into " << target
      << " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  if (job.world() > static_cast<int64_t>(files.size())) {
    std::string missing;
    int64_t listed = 0;
    for (int64_t r = 0, i = 0; r < job.world(); ++r) {
      if (i < static_cast<int64_t>(files.size()) && files[static_cast<size_t>(i)].first == r) {
        ++i;
      } else if (++listed <= 20) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    if (listed > 20) missing += " and " + std::to_string(listed - 20) + " more";
    out << "trace: note: the job had " << job.world() << " ranks, and rank(s) " << missing
        << " wrote no trace file (the job's output says why): the merge lacks them\n";
  }
  return 0;
}

int run_flight(const CliArgs& cli, std::ostream& out) {
  const std::string dir = cli.compare_runs.at(0) + "/flight";
  const auto files = rank_files(dir);
  if (files.empty()) {
    throw ConfigError(
        "no flight records (rank-N.json) in " + dir +
        "; ranks write them on a failure, a hang past launch.timeout_s, or "
        "SIGUSR2 (kill -USR2 to zt's launcher, which sends it on to every rank, or to each "
        "rank's pid)");
  }
  // The job's size as its ranks recorded it: the highest file present missed the ranks that died
  // without one (the likely culprits), and took in an earlier, larger job's leftovers.
  OneJobsFiles job("flight records", "");
  for (const auto& [rank, path] : files) {
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("world") || !j["world"].is_number_integer()) continue;
    job.take(rank, path, j["world"].get<int64_t>());
  }
  const int64_t world = job.world();
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
    std::error_code ec;  // unreadable: read_run_metrics names it below
    if (!std::filesystem::is_directory(run_dir, ec)) {
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
