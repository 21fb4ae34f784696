// The report layer's pieces: round chart ticks (the A/B report showed "2.75" and "4.613") and
// a run's report.html from a metrics.jsonl with every chart, markers for saves and resumes, and
// a clear error for a folder without metrics; a diverged step's numbers written and read back.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "report/run_metrics.h"
#include "report/run_report.h"
#include "report/svg_chart.h"
#include "report/train_report.h"
#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/offload.h"

namespace svg = zt::trainer::svg;

namespace {

// Every tick a multiple of the spacing, and the spacing 1, 2 or 5 times a power of ten.
void check_round(const std::vector<double>& ticks, double lo, double hi, bool whole) {
  INFO("lo " << lo << " hi " << hi);
  REQUIRE(ticks.size() >= 2);
  CHECK(ticks.front() <= lo);
  CHECK(ticks.back() >= hi);
  CHECK(ticks.size() <= 12);
  const double step = ticks[1] - ticks[0];
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const bool one_two_five = std::abs(mantissa - 1) < 1e-6 || std::abs(mantissa - 2) < 1e-6 ||
                            std::abs(mantissa - 5) < 1e-6;
  CHECK(one_two_five);
  for (double t : ticks) {
    CHECK(std::abs(t / step - std::round(t / step)) < 1e-6);
    if (whole) CHECK(t == std::round(t));
  }
}

std::string temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "zt-report-XXXXXX").string();
  return mkdtemp(tmpl.data());
}

}  // namespace

TEST_CASE("report: chart ticks are round, whole where they count steps") {
  check_round(svg::nice_ticks(0, 4.613), 0, 4.613, false);
  check_round(svg::nice_ticks(2.75, 3.9), 2.75, 3.9, false);
  check_round(svg::nice_ticks(0, 0.0123), 0, 0.0123, false);
  check_round(svg::nice_ticks(1, 7, 6, true), 1, 7, true);
  check_round(svg::nice_ticks(1, 1000, 6, true), 1, 1000, true);
  check_round(svg::nice_ticks(6000, 10000), 6000, 10000, false);
  // Values a damaged metrics file can hold (a fuzz finding: no tick at all, then back() of an
  // empty list): an axis still comes out, finite, of at least two ticks.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{
           {-1e308, 1e308}, {nan, 1}, {0, inf}, {3.25e16, 3.25e16 + 8}, {1, 1}}) {
    CAPTURE(lo);
    CAPTURE(hi);
    const std::vector<double> ticks = svg::nice_ticks(lo, hi);
    REQUIRE(ticks.size() >= 2);
    for (double t : ticks) CHECK(std::isfinite(t));
  }
  CHECK(svg::num(10000) == "10000");
  CHECK(svg::num(0.30000000000000004) == "0.3");
}

TEST_CASE("report: a run's report.html has every chart, its markers, and says what it read") {
  const std::string dir = temp_dir();
  std::ofstream m(dir + "/metrics.jsonl");
  for (int step = 1; step <= 6; ++step) {
    m << "{\"step\":" << step << ",\"loss\":" << 5.0 - 0.3 * step
      << ",\"step_time_s\":0.1,\"tokens_per_s\":9000,\"memory\":[{\"rank\":0,\"params\":1048576,"
         "\"peak_rss\":2097152}],\"times\":{\"compute_s\":0.08,\"comm_wait_s\":0.01,"
         "\"read_wait_s\":0,\"write_wait_s\":0,\"optimizer_s\":0.005},\"step_bytes\":"
         "{\"collectives\":3145728,\"offload_read\":0,\"offload_written\":0},\"flops\":3e10,"
         "\"mfu\":0.6}\n";
    if (step == 3) {
      m << "{\"event\":\"checkpoint\",\"step\":3,\"folder\":\"x\",\"bytes\":10,\"stall_s\":0.01,"
           "\"write_s\":0.04}\n{\"event\":\"resume\",\"step\":3,\"folder\":\"x\",\"load_s\":0.1}\n";
    }
  }
  m << "{\"step\":7,\"loss\":";  // a line cut short by a kill is skipped
  m.close();
  const std::string html = zt::trainer::run_report_html(dir);
  for (const char* chart :
       {"loss", "time-split", "tokens", "mfu", "memory", "bytes", "checkpoints"}) {
    INFO(chart);
    CHECK(html.find(std::string("data-chart='") + chart + "'") != std::string::npos);
  }
  CHECK(html.find(">ckpt<") != std::string::npos);
  CHECK(html.find("checkpoint written (all ranks)") != std::string::npos);
  CHECK(html.find(">resume<") != std::string::npos);
  CHECK(html.find("60%") != std::string::npos);  // the median MFU in the table
  std::filesystem::remove_all(dir);
  CHECK_THROWS_AS(zt::trainer::run_report_html(dir), zt::ConfigError);
}

TEST_CASE("report: a diverged step's non-finite numbers are written as null and read back as NaN") {
  const std::string dir = temp_dir();
  {
    zt::trainer::TrainReport report(dir + "/metrics.jsonl", 3, 1000);
    zt::trainer::StepMetrics m;
    for (int step = 1; step <= 3; ++step) {
      m.step = step;
      m.loss = step == 2 ? std::numeric_limits<double>::quiet_NaN() : 4.0 - step;
      m.grad_norm = step == 2 ? std::numeric_limits<double>::infinity() : 1.5;
      m.skipped = step == 2;
      m.step_seconds = 0.25;
      m.tokens_per_s = 4000;
      report.log(m, {zt::trainer::RankMemory{}}, zt::CommStats{}, zt::OffloadStats{});
    }
  }
  // `nan` and `inf` are not JSON: every reader refused the whole file (ab, compare, tune).
  std::ifstream in(dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    CHECK_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded());
  }
  const zt::trainer::RunMetrics run = zt::trainer::read_run_metrics(dir);
  REQUIRE(run.steps.size() == 3);
  CHECK(std::isnan(run.steps[1].loss));
  CHECK(std::isnan(run.steps[1].grad_norm));
  CHECK(run.steps[2].loss == 1.0);
  // The report leaves the point out of the loss line and still says the final loss.
  const std::string html = zt::trainer::run_report_html(dir);
  CHECK(html.find("data-chart='loss'") != std::string::npos);
  CHECK(html.find("<td>1</td>") != std::string::npos);
  // A last line cut short by a kill is left out, as the run report does; a bad line before the
  // end is still the file's fault.
  std::ofstream(dir + "/metrics.jsonl", std::ios::app) << "{\"step\":4,\"loss\":";
  CHECK(zt::trainer::read_run_metrics(dir).steps.size() == 3);
  std::ofstream(dir + "/metrics.jsonl", std::ios::app) << "\n{\"step\":5}\n";
  CHECK_THROWS_WITH_AS(zt::trainer::read_run_metrics(dir), doctest::Contains("metrics.jsonl:4"),
                       zt::ConfigError);
  std::filesystem::remove_all(dir);
}
