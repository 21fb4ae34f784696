// The report layer's pieces: round chart ticks (the A/B report showed "2.75" and "4.613") and
// a run's report.html from a metrics.jsonl with every chart, markers for saves and resumes, and
// a clear error for a folder without metrics; a diverged step's numbers written and read back.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>

#include "../../tests/test_util.h"
#include "report/report_file.h"
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
      // An evaluation that diverged too (its null made the whole report fail).
      zt::trainer::EvalEvent e;
      e.step = step;
      e.loss = step == 2 ? std::numeric_limits<double>::infinity() : 5.0 - step;
      report.log_eval(e);
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
  // The report leaves the points out of the loss lines and still says the final loss.
  const std::string html = zt::trainer::run_report_html(dir);
  CHECK(html.find("data-chart='loss'") != std::string::npos);
  CHECK(html.find("validation loss") != std::string::npos);
  CHECK(html.find("<td>1</td>") != std::string::npos);
  CHECK(html.find("nan") == std::string::npos);
  CHECK(html.find("inf'") == std::string::npos);
  // A last line cut short by a kill is left out, as the run report does; a bad line before the
  // end is still the file's fault.
  std::ofstream(dir + "/metrics.jsonl", std::ios::app) << "{\"step\":4,\"loss\":";
  CHECK(zt::trainer::read_run_metrics(dir).steps.size() == 3);
  std::ofstream(dir + "/metrics.jsonl", std::ios::app) << "\n{\"step\":5}\n";
  CHECK_THROWS_WITH_AS(zt::trainer::read_run_metrics(dir), doctest::Contains("metrics.jsonl:7"),
                       zt::ConfigError);
  // A marker line whose step is a string: the file's fault with its line, not a crash.
  {
    std::ofstream out(dir + "/metrics.jsonl");
    out << "{\"step\":1,\"loss\":2,\"step_time_s\":0.5}\n{\"event\":\"resume\",\"step\":\"3\"}\n";
  }
  CHECK_THROWS_WITH_AS(zt::trainer::run_report_html(dir), doctest::Contains("metrics.jsonl:2"),
                       zt::ConfigError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("report: a metrics file that stops taking lines keeps whole ones, and none after") {
  const std::string dir = temp_dir();
  const std::string path = dir + "/metrics.jsonl";
  // Room for a few lines: a write past RLIMIT_FSIZE fails (EFBIG, its signal ignored) as one on
  // a full disk does (ENOSPC), part of a line written.
  rlimit before{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &before) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 2000;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  {
    zt::trainer::TrainReport report(path, 40, 1000);
    zt::trainer::StepMetrics m;
    for (int step = 1; step <= 40; ++step) {
      m.step = step;
      m.loss = 4.0;
      m.step_seconds = 0.25;
      report.log(m, {zt::trainer::RankMemory{}}, zt::CommStats{}, zt::OffloadStats{});
    }
  }
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &before) == 0);
  std::signal(SIGXFSZ, old_handler);
  // Steps 1..n, each line whole, and nothing of a step after the first that failed (a line
  // appended after a torn one would have read as the file's fault).
  std::ifstream in(path);
  int64_t steps = 0;
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j["step"] == ++steps);
  }
  CHECK(steps > 0);
  CHECK(steps < 40);
  CHECK(zt::trainer::read_run_metrics(dir).steps.size() == static_cast<size_t>(steps));
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "report: a step's bytes count from its start, and from the new tiers' zero after a switch") {
  const std::string dir = temp_dir();
  {
    zt::trainer::TrainReport report(dir + "/metrics.jsonl", 3, 1000);
    zt::trainer::StepMetrics m;
    m.step_seconds = 0.25;
    zt::OffloadStats io;
    m.step = 1;
    io.bytes_read = 1000;
    report.log(m, {zt::trainer::RankMemory{}}, zt::CommStats{}, io);
    // The switch built new tiers: their counters start again.
    m.step = 2;
    io.bytes_read = 300;
    report.log(m, {zt::trainer::RankMemory{}}, zt::CommStats{}, io);
    // A save read 4000 bytes between steps (its own line counts them): not the next step's.
    io.bytes_read = 4300;
    report.start_step(zt::CommStats{}, io);
    m.step = 3;
    io.bytes_read = 4500;
    report.log(m, {zt::trainer::RankMemory{}}, zt::CommStats{}, io);
  }
  std::ifstream in(dir + "/metrics.jsonl");
  std::vector<int64_t> read;
  for (std::string line; std::getline(in, line);)
    read.push_back(nlohmann::json::parse(line)["step_bytes"]["offload_read"].get<int64_t>());
  CHECK(read == std::vector<int64_t>{1000, 300, 200});
  std::filesystem::remove_all(dir);
}

namespace {

// The numbers of an attribute (cy='...') across a chart's SVG.
std::vector<double> attribute_values(const std::string& svg_text, const std::string& name) {
  std::vector<double> out;
  const std::string key = " " + name + "='";
  for (size_t at = svg_text.find(key); at != std::string::npos; at = svg_text.find(key, at + 1))
    out.push_back(std::stod(svg_text.substr(at + key.size())));
  return out;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("report: two writers of one report at once leave one of their texts whole") {
  // Both wrote path.tmp together: the mix of the two texts was renamed into place.
  const std::string dir = temp_dir();
  const std::string path = dir + "/ab.json";
  const std::string a(4 << 20, 'a'), b(4 << 20, 'b');
  for (int round = 0; round < 8; ++round) {
    std::thread other([&] { zt::trainer::write_report_file(path, a); });
    zt::trainer::write_report_file(path, b);
    other.join();
    std::ifstream in(path, std::ios::binary);
    const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CAPTURE(round);
    REQUIRE((got == a || got == b));
  }
  // No temporary file is left beside it.
  CHECK(std::distance(std::filesystem::directory_iterator(dir),
                      std::filesystem::directory_iterator()) == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("report: negative values stay inside the chart (the axis goes below 0)") {
  svg::Series loss{"loss", "#000", {{1, -3.0}, {2, -2.0}, {3, -1.0}}};
  const std::string chart = svg::line_chart("loss", "loss", "step", "loss", {loss}, {}, true);
  const std::vector<double> cy = attribute_values(chart, "cy");
  REQUIRE(cy.size() == 3);
  for (double y : cy) {
    CHECK(y >= svg::kTop);
    CHECK(y <= svg::kHeight - svg::kBottom);
  }
  CHECK(cy[0] > cy[2]);  // -3 below -1
  svg::Series mixed{"bytes", "#000", {{1, -5.0}, {2, 10.0}}};
  for (double y :
       attribute_values(svg::line_chart("b", "b", "step", "MiB", {mixed}, {}, true), "cy"))
    CHECK((y >= svg::kTop && y <= svg::kHeight - svg::kBottom));
}

TEST_CASE("report: a long run's charts draw a mark per bucket of steps, not per step") {
  svg::Series loss{"loss", "#000", {}}, a{"a", "#111", {}}, b{"b", "#222", {}};
  for (int step = 1; step <= 100'000; ++step) {
    loss.points.push_back({static_cast<double>(step), 5.0 - step * 1e-5});
    a.points.push_back({static_cast<double>(step), 1.0});
    b.points.push_back({static_cast<double>(step), step <= 50'000 ? 2.0 : 4.0});
  }
  const std::string line = svg::line_chart("loss", "loss", "step", "loss", {loss}, {}, true);
  const int circles = count_of(line, "<circle");
  CHECK(circles <= 2000);
  CHECK(circles >= 1000);
  CHECK(line.find("mean of 50 steps") != std::string::npos);
  const std::string stack = svg::stacked_chart("t", "t", "step", "s", {a, b});
  const int rects = count_of(stack, "<rect class='mark'");
  CHECK(rects <= 4000);
  CHECK(rects >= 2000);
  // Each bucket's bar is its steps' mean: a's part 1, b's 2 then 4, and the tallest stack 5.
  CHECK(stack.find(": 4</title>") != std::string::npos);
  CHECK(stack.find(": 3</title>") == std::string::npos);  // no bucket mixes b's halves
  // A short run keeps a mark per step.
  svg::Series few{"loss", "#000", {{1, 2.0}, {2, 1.5}, {3, 1.2}}};
  CHECK(count_of(svg::line_chart("l", "l", "step", "loss", {few}, {}, true), "<circle") == 3);
}

TEST_CASE("an earlier run's results are removed only beside the file that names them its own") {
  zt::test::TempDir dir;
  const std::string d = dir.path().string();
  // A report.html alone may be a training run's: an ab or tune given that folder keeps it.
  zt::test::write_file(dir.path() / "report.html", "<html></html>\n");
  CHECK(zt::trainer::remove_previous_outputs(d, {"ab.json", "report.html"}).empty());
  CHECK(std::filesystem::exists(dir.path() / "report.html"));
  // With an earlier A/B's ab.json beside it, both go.
  zt::test::write_file(dir.path() / "ab.json", "{}\n");
  CHECK(zt::trainer::remove_previous_outputs(d, {"ab.json", "report.html"}) ==
        std::vector<std::string>{"ab.json", "report.html"});
  CHECK_FALSE(std::filesystem::exists(dir.path() / "report.html"));
}
