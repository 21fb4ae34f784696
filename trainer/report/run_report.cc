#include "report/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

#include "report/report_file.h"
#include "report/run_metrics.h"
#include "report/svg_chart.h"
#include "zt/error.h"
#include "zt/host/json_numbers.h"

namespace zt::trainer {

namespace {

using nlohmann::json;
using svg::Marker;
using svg::Series;

constexpr double kMiB = 1048576.0;

struct RunLines {
  std::string path;
  std::vector<json> steps;        // lines with a step_time_s, in file order
  std::vector<json> checkpoints;  // "event":"checkpoint"
  std::vector<json> evals;        // "event":"eval" ([eval]'s validation losses)
  std::vector<Marker> markers;    // checkpoints, resumes, A/B switches
};

RunLines read_lines(const std::string& run_dir) {
  RunLines r;
  // A folder is a run's out_dir (an ifstream opens a folder without failing): its metrics.jsonl.
  r.path = std::filesystem::is_directory(run_dir) ? run_dir + "/metrics.jsonl" : run_dir;
  std::ifstream in(r.path);
  if (!in) {
    throw ConfigError("no metrics at " + r.path +
                      "; give trainer report the run.out_dir of a "
                      "training run");
  }
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;  // a line cut short by a kill
    if (j.contains("event") && !j["event"].is_string()) {
      throw ConfigError(r.path + ":" + std::to_string(number) +
                        ": \"event\" is not a string; is this a metrics.jsonl zt wrote?");
    }
    const std::string event = j.value("event", "");
    // A marker's step or label of another type is the file's fault, named by its line.
    try {
      if (event == "checkpoint") {
        r.checkpoints.push_back(j);
        r.markers.push_back({j.value("step", 0.0), "ckpt", "#2ca02c"});
      } else if (event == "eval") {
        r.evals.push_back(j);
      } else if (event == "resume") {
        r.markers.push_back({j.value("step", 0.0), "resume", "#ff7f0e"});
      } else if (event == "ab_switch") {
        r.markers.push_back({j.value("step", 0.0), "to " + j.value("to", ""), "#9467bd"});
      } else if (event.empty() && j.contains("step_time_s")) {
        // Only what the charts read: a line's per-rank memory and per-op counts, kept for every
        // step of a long run as parsed JSON, held gigabytes at its end (about 15 KB a step at
        // 8 ranks). The memory chart reads the last step's alone.
        j.erase("comm");
        j.erase("offload_io");
        if (!r.steps.empty()) r.steps.back().erase("memory");
        r.steps.push_back(std::move(j));
      }
    } catch (const json::exception& e) {
      throw ConfigError(r.path + ":" + std::to_string(number) + ": a value of the wrong type (" +
                        e.what() + "); is this a metrics.jsonl zt wrote?");
    }
  }
  if (r.steps.empty()) throw ConfigError(r.path + " holds no training step");
  return r;
}

double step_of(const json& j) { return j.value("step", 0.0); }

// A real field of a step line: 0 when absent, NaN for the null a non-finite value is written as
// (a diverged loss, json_real); other types throw the JSON library's type error.
double real(const json& j, const char* key) {
  if (!j.contains(key)) return 0;
  if (const std::optional<double> v = json_real(j.at(key))) return *v;
  return j.at(key).get<double>();
}

// A non-finite value is a gap in the line, not a point that takes the axis with it.
Series series_of(const RunLines& r, const std::string& name, const std::string& color,
                 double (*value)(const json&)) {
  Series se{name, color, {}};
  for (const json& j : r.steps) {
    const double v = value(j);
    if (std::isfinite(v)) se.points.push_back({step_of(j), v});
  }
  return se;
}

// Each step's `object`.`key` (0 where a line lacks it) divided by `unit`.
Series field_series(const RunLines& r, const char* object, const char* key, const std::string& name,
                    const std::string& color, double unit) {
  Series se{name, color, {}};
  for (const json& j : r.steps)
    se.points.push_back({step_of(j), j.value(object, json::object()).value(key, 0.0) / unit});
  return se;
}

std::string loss_chart(const RunLines& r) {
  std::vector<Series> s = {
      series_of(r, "training loss", "#1f77b4", [](const json& j) { return real(j, "loss"); })};
  if (!r.evals.empty()) {
    Series val{"validation loss", "#d62728", {}};
    // A diverged evaluation's loss is written as null (json_real): a gap, as in the training
    // loss.
    for (const json& j : r.evals) {
      const double v = real(j, "val_loss");
      if (std::isfinite(v)) val.points.push_back({step_of(j), v});
    }
    s.push_back(std::move(val));
  }
  return svg::line_chart("loss", "loss per step", "step", "loss", s, r.markers, true);
}

// compute / comm wait / read wait / write wait / optimizer per step, stacked (rank 0's engine).
std::string time_chart(const RunLines& r) {
  static const std::pair<const char*, const char*> kParts[] = {{"compute_s", "compute"},
                                                               {"comm_wait_s", "comm wait"},
                                                               {"read_wait_s", "read wait"},
                                                               {"write_wait_s", "write wait"},
                                                               {"optimizer_s", "optimizer"}};
  std::vector<Series> series;
  size_t color = 0;
  for (const auto& [key, name] : kParts)
    series.push_back(field_series(r, "times", key, name, svg::palette()[color++], 1));
  // Steps the engine did not time show their whole time as one part.
  Series other{"other (untimed)", "#bbbbbb", {}};
  for (const json& j : r.steps) {
    double parts = 0;
    for (const auto& [key, name] : kParts)
      parts += j.value("times", json::object()).value(key, 0.0);
    other.points.push_back({step_of(j), std::max(0.0, real(j, "step_time_s") - parts)});
  }
  series.push_back(std::move(other));
  return svg::stacked_chart("time-split", "step time split (rank 0, seconds)", "step", "seconds",
                            series, r.markers);
}

std::string throughput_charts(const RunLines& r) {
  std::string out = svg::line_chart(
      "tokens", "tokens per second", "step", "tokens/s",
      {series_of(r, "tokens/s", "#1f77b4", [](const json& j) { return real(j, "tokens_per_s"); })},
      r.markers, true);
  if (r.steps.back().contains("mfu")) {
    out += svg::line_chart(
        "mfu", "MFU: model FLOPs per second over the measured peak, per rank (%)", "step", "%",
        {series_of(r, "MFU", "#d62728", [](const json& j) { return 100 * real(j, "mfu"); })},
        r.markers, true);
  }
  return out;
}

// Model states by category per rank at the last step (MiB), and the peak RSS.
std::string memory_chart(const RunLines& r) {
  const json memory = r.steps.back().value("memory", json::array());
  std::vector<std::string> categories;
  std::vector<Series> series;
  for (size_t rank = 0; rank < memory.size(); ++rank)
    series.push_back({"rank " + std::to_string(rank), svg::palette()[rank % 8], {}});
  std::vector<std::string> names = memory_categories();
  names.push_back("peak_rss");
  for (const std::string& c : names) {
    bool any = false;
    for (const json& m : memory) any = any || m.value(c, 0.0) > 0;
    if (!any) continue;
    const double x = static_cast<double>(categories.size());
    categories.push_back(c);
    for (size_t rank = 0; rank < memory.size(); ++rank)
      series[rank].points.push_back({x, memory[rank].value(c, 0.0) / kMiB});
  }
  return svg::bar_chart("memory", "memory by category per rank at the last step (MiB)", "MiB",
                        categories, series);
}

std::string bytes_chart(const RunLines& r) {
  static const std::pair<const char*, const char*> kKinds[] = {
      {"collectives", "collectives"},
      {"offload_read", "offload read"},
      {"offload_written", "offload written"}};
  std::vector<Series> series;
  size_t color = 0;
  for (const auto& [key, name] : kKinds)
    series.push_back(field_series(r, "step_bytes", key, name, svg::palette()[color++], kMiB));
  // A save's files (every rank's: the manifest counts them together) at the step it saved.
  if (!r.checkpoints.empty()) {
    Series saved{"checkpoint written (all ranks)", svg::palette()[color], {}};
    for (const json& c : r.checkpoints)
      saved.points.push_back({c.value("step", 0.0), c.value("bytes", 0.0) / kMiB});
    series.push_back(std::move(saved));
  }
  return svg::line_chart("bytes", "bytes moved per step by rank 0, and each checkpoint (MiB)",
                         "step", "MiB", series, r.markers, true);
}

std::string checkpoint_chart(const RunLines& r) {
  if (r.checkpoints.empty()) return "";
  std::vector<std::string> saves;
  Series stall{"the step waited", "#d62728", {}},
      write{"writing (in the background)", "#2ca02c", {}};
  for (const json& c : r.checkpoints) {
    const double x = static_cast<double>(saves.size());
    saves.push_back("step " + std::to_string(c.contains("step")
                                                 ? json_integer<int64_t>(c["step"]).value_or(0)
                                                 : 0));
    stall.points.push_back({x, c.value("stall_s", 0.0)});
    write.points.push_back({x, c.value("write_s", 0.0)});
  }
  return svg::bar_chart("checkpoints", "checkpoint saves: stall and write time (s)", "seconds",
                        saves, {stall, write});
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string summary_table(const RunLines& r) {
  std::vector<double> times, tokens, mfu;
  const auto keep_finite = [](std::vector<double>& v, double x) {
    if (std::isfinite(x)) v.push_back(x);
  };
  for (const json& j : r.steps) {
    keep_finite(times, real(j, "step_time_s"));
    keep_finite(tokens, real(j, "tokens_per_s"));
    if (j.contains("mfu")) keep_finite(mfu, 100 * real(j, "mfu"));
  }
  double peak_rss = 0;
  for (const json& m : r.steps.back().value("memory", json::array()))
    peak_rss = std::max(peak_rss, m.value("peak_rss", 0.0));
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "<table><tr><th>steps</th><th>final loss</th><th>median step s</th>"
                "<th>median tokens/s</th><th>median MFU</th><th>checkpoints</th>"
                "<th>largest peak RSS MiB</th></tr><tr><td>%zu (to step %.15g)</td><td>%.5g</td>"
                "<td>%.4f</td><td>%.1f</td><td>%s</td><td>%zu</td><td>%.1f</td></tr></table>\n",
                // The step as the file has it: a double (converting one past long long's
                // range was undefined: tests/fuzz's metrics target found 7.8e50).
                r.steps.size(), step_of(r.steps.back()), real(r.steps.back(), "loss"),
                median(times), median(tokens),
                mfu.empty() ? "unknown" : (svg::num(median(mfu)) + "%").c_str(),
                r.checkpoints.size(), peak_rss / kMiB);
  return buf;
}

}  // namespace

std::string run_report_html(const std::string& run_dir) {
  const RunLines r = read_lines(run_dir);
  std::ostringstream s;
  // Every value on a line may have any JSON type: one the charts cannot use is the file's fault
  // (nlohmann's type errors escaped as crashes before tests/fuzz's metrics target).
  try {
    s << svg::page_head("zt run: " + run_dir) << "<h1>Run " << svg::escape(run_dir) << "</h1>\n"
      << summary_table(r) << "<p>From " << svg::escape(r.path)
      << ". Markers: checkpoints (green), resumes and restarts (orange), live A/B switches "
         "(purple). Times are rank 0's; a timeline of every rank: [trace] enabled = true.</p>\n"
      << loss_chart(r) << time_chart(r) << throughput_charts(r) << memory_chart(r) << bytes_chart(r)
      << checkpoint_chart(r) << svg::page_foot();
  } catch (const json::exception& e) {
    throw ConfigError(r.path + ": a value of the wrong type (" + e.what() +
                      "); is this a metrics.jsonl zt wrote?");
  }
  return s.str();
}

void write_run_report(const std::string& run_dir, const std::string& path) {
  write_report_file(path, run_report_html(run_dir));
}

}  // namespace zt::trainer
