#include "ab/ab_html.h"

#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace zt::trainer {

namespace {

using svg::Axes;
using svg::escape;
using svg::num;
using svg::Series;
const char* const kArmColors[] = {"#1f77b4", "#d62728"};

// p10-p90 boxes with the median, and every step as a dot, one row per arm.
std::string distribution_chart(const AbResult& r) {
  Axes ax{0, 1, 0, 0, {}, {}};
  for (const ArmResult* arm : {&r.a, &r.b}) {
    for (double v : arm->step_s) ax.y1 = std::max(ax.y1, v);
  }
  ax.y1 = ax.y1 > 0 ? ax.y1 * 1.05 : 1;
  ax.round(false, false);
  std::ostringstream s;
  s << ax.frame("", "step time (s)");
  int i = 0;
  for (const ArmResult* arm : {&r.a, &r.b}) {
    const double center = ax.px(i == 0 ? 0.3 : 0.7), half = 60;
    const char* color = kArmColors[i++];
    s << "<rect class='mark' x='" << center - half << "' y='" << ax.py(arm->p90_s) << "' width='"
      << 2 * half << "' height='" << std::max(1.0, ax.py(arm->p10_s) - ax.py(arm->p90_s))
      << "' fill='" << color << "' fill-opacity='0.25' stroke='" << color << "'/><line x1='"
      << center - half << "' x2='" << center + half << "' y1='" << ax.py(arm->median_s) << "' y2='"
      << ax.py(arm->median_s) << "' stroke='" << color << "' stroke-width='3'/><text x='" << center
      << "' y='" << svg::kHeight - svg::kBottom + 16 << "' text-anchor='middle'>"
      << escape(arm->arm.name + ": " + arm->label) << "</text>";
    for (size_t k = 0; k < arm->step_s.size(); ++k) {
      const double jitter = (static_cast<double>(k % 9) - 4) * 6;
      s << "<circle class='mark' r='2' fill='" << color << "' cx='" << center + jitter << "' cy='"
        << ax.py(arm->step_s[k]) << "'/>";
    }
  }
  return svg::figure("distribution", "step time distribution (box: p10-p90, line: median)",
                     s.str());
}

std::vector<Series> step_time_series(const AbResult& r) {
  std::vector<Series> out;
  int i = 0;
  for (const ArmResult* arm : {&r.a, &r.b}) {
    Series se{arm->arm.name + ": " + arm->label, kArmColors[i++], {}};
    double index = 0;
    for (const RunMetrics& run : arm->runs) {
      for (size_t k = static_cast<size_t>(r.warmup_steps); k < run.steps.size(); ++k)
        se.points.push_back({++index, run.steps[k].step_time_s});
    }
    out.push_back(se);
  }
  return out;
}

std::vector<Series> loss_series(const AbResult& r) {
  std::vector<Series> out;
  int i = 0;
  for (const ArmResult* arm : {&r.a, &r.b}) {
    Series se{arm->arm.name + ": " + arm->label + " (run 1)", kArmColors[i++], {}};
    // A loss that is not finite (null in metrics.jsonl, an arm that diverged) has no place on
    // the chart: as a coordinate it broke the whole line.
    for (const StepRecord& s : arm->runs.front().steps) {
      if (std::isfinite(s.loss)) se.points.push_back({static_cast<double>(s.step), s.loss});
    }
    out.push_back(se);
  }
  return out;
}

// A memory category short enough to sit under its bars.
std::string short_name(const std::string& category) {
  static const std::pair<const char*, const char*> kShort[] = {
      {"optimizer_states", "optim"},  {"offload_param", "off.param"},
      {"offload_grads", "off.grads"}, {"offload_optimizer", "off.optim"},
      {"offload_staging", "staging"}, {"gathered_peak", "gathered"}};
  for (const auto& [name, short_form] : kShort) {
    if (category == name) return short_form;
  }
  return category;
}

// Model states by category at each arm's first run's last step, per rank (MiB).
std::string memory_chart(const AbResult& r) {
  std::vector<std::string> categories;
  std::vector<Series> series;
  const StepRecord& a_last = r.a.runs.front().steps.back();
  const StepRecord& b_last = r.b.runs.front().steps.back();
  const size_t ranks = std::max(a_last.memory.size(), b_last.memory.size());
  for (int i = 0; i < 2; ++i) {
    const ArmResult& arm = i == 0 ? r.a : r.b;
    series.push_back({arm.arm.name + ": " + arm.label, kArmColors[i], {}});
  }
  for (size_t rank = 0; rank < ranks; ++rank) {
    for (const std::string& c : memory_categories()) {
      auto value = [&](const StepRecord& s) {
        if (rank >= s.memory.size() || !s.memory[rank].count(c)) return 0.0;
        return static_cast<double>(s.memory[rank].at(c)) / 1048576.0;
      };
      if (value(a_last) == 0 && value(b_last) == 0) continue;
      const double x = static_cast<double>(categories.size());
      categories.push_back("r" + std::to_string(rank) + " " + short_name(c));
      series[0].points.push_back({x, value(a_last)});
      series[1].points.push_back({x, value(b_last)});
    }
  }
  return svg::bar_chart("memory", "memory by category per rank (MiB, last step of run 1)", "MiB",
                        categories, series);
}

// Collectives per step by op: calls (`bytes` false) or MiB moved.
std::string comm_chart(const AbResult& r, bool bytes) {
  std::vector<std::string> ops;
  std::vector<Series> series;
  for (int i = 0; i < 2; ++i) {
    const ArmResult& arm = i == 0 ? r.a : r.b;
    series.push_back({arm.arm.name + ": " + arm.label, kArmColors[i], {}});
  }
  auto value = [&](const std::pair<double, double>& v) {
    return bytes ? v.second / 1048576.0 : v.first;
  };
  for (const auto& [op, va] : r.a.comm_per_step) {
    const auto it = r.b.comm_per_step.find(op);
    const double vb = it == r.b.comm_per_step.end() ? 0 : value(it->second);
    if (value(va) == 0 && vb == 0) continue;
    const double x = static_cast<double>(ops.size());
    ops.push_back(op);
    series[0].points.push_back({x, value(va)});
    series[1].points.push_back({x, vb});
  }
  return bytes ? svg::bar_chart("comm-bytes", "collective MiB per step", "MiB", ops, series)
               : svg::bar_chart("comm", "collective calls per step", "calls", ops, series);
}

std::string arm_rows(const AbResult& r) {
  std::ostringstream s;
  char buf[512];
  for (const ArmResult* arm : {&r.a, &r.b}) {
    // The label apart from the fixed-size numbers: a long override (a path) cut the row short.
    s << "<tr><td>" << escape(arm->arm.name) << "</td><td>" << escape(arm->label) << "</td>";
    std::snprintf(buf, sizeof(buf),
                  "<td>%zu</td><td>%.4f</td><td>%.4f</td><td>%.4f</td>"
                  "<td>%.1f</td><td>%.1f</td><td>%.1f</td></tr>",
                  arm->step_s.size(), arm->median_s, arm->p10_s, arm->p90_s, arm->tokens_per_s,
                  arm->peak_model_states / 1048576.0, arm->peak_rss / 1048576.0);
    s << buf;
  }
  return s.str();
}

}  // namespace

std::string ab_html(const AbResult& r) {
  std::ostringstream s;
  const bool diverged = r.agreement.checked && !r.agreement.agree;
  s << svg::page_head("zt A/B: " + r.b.label + " vs " + r.a.label)
    << "<h1>A/B: " << escape(r.b.label) << " vs " << escape(r.a.label) << "</h1>\n"
    << "<p class='verdict" << (diverged ? " bad" : "") << "'>" << escape(r.verdict) << "</p>\n"
    << "<table><tr><th>arm</th><th>overrides</th><th>steps timed</th><th>median s</th>"
    << "<th>p10 s</th><th>p90 s</th><th>tokens/s</th><th>model states/rank MiB</th>"
    << "<th>peak RSS MiB</th></tr>" << arm_rows(r) << "</table>\n"
    << "<p>Warm-up steps left out of the timings, per run: " << r.warmup_steps
    << ". Speed: median step time of A over B, 95% bootstrap interval [" << num(r.speedup.low)
    << ", " << num(r.speedup.high) << "].</p>\n"
    << svg::line_chart("step-time",
                       "step time per step (runs in the order they ran, warm-up left out)",
                       "timed step", "seconds", step_time_series(r))
    << distribution_chart(r) << memory_chart(r) << comm_chart(r, false) << comm_chart(r, true)
    << svg::line_chart("loss", "loss per step, both arms overlaid", "step", "loss", loss_series(r),
                       {}, /*whole_x=*/true)
    << svg::page_foot();
  return s.str();
}

void write_ab_html(const AbResult& r, const std::string& path) {
  write_report_file(path, ab_html(r));
}

}  // namespace zt::trainer
