#include "ab/ab_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace zt::trainer {

namespace {

constexpr double kWidth = 760, kHeight = 260;
constexpr double kLeft = 70, kRight = 20, kTop = 30, kBottom = 40;
const char* const kArmColors[] = {"#1f77b4", "#d62728"};

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;  // (x, y); bars use x as the category index
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// Maps data ranges onto the plot area and draws the frame with 5 ticks per axis.
struct Axes {
  double x0, x1, y0, y1;
  double px(double x) const {
    return kLeft + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (kWidth - kLeft - kRight);
  }
  double py(double y) const {
    return kHeight - kBottom - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * (kHeight - kTop - kBottom);
  }
  std::string frame(const std::string& x_label, const std::string& y_label,
                    bool x_ticks = true) const {
    std::ostringstream s;
    s << "<line x1='" << kLeft << "' y1='" << kHeight - kBottom << "' x2='" << kWidth - kRight
      << "' y2='" << kHeight - kBottom << "' stroke='#444'/>"
      << "<line x1='" << kLeft << "' y1='" << kTop << "' x2='" << kLeft << "' y2='"
      << kHeight - kBottom << "' stroke='#444'/>";
    for (int i = 0; i <= 4; ++i) {
      const double y = y0 + (y1 - y0) * i / 4;
      s << "<text x='" << kLeft - 6 << "' y='" << py(y) + 4 << "' text-anchor='end'>" << num(y)
        << "</text><line x1='" << kLeft << "' y1='" << py(y) << "' x2='" << kWidth - kRight
        << "' y2='" << py(y) << "' stroke='#eee'/>";
      if (!x_ticks) continue;
      const double x = x0 + (x1 - x0) * i / 4;
      s << "<text x='" << px(x) << "' y='" << kHeight - kBottom + 16 << "' text-anchor='middle'>"
        << num(x) << "</text>";
    }
    s << "<text x='" << (kLeft + kWidth - kRight) / 2 << "' y='" << kHeight - 6
      << "' text-anchor='middle'>" << escape(x_label) << "</text><text x='14' y='"
      << (kTop + kHeight - kBottom) / 2 << "' text-anchor='middle' transform='rotate(-90 14 "
      << (kTop + kHeight - kBottom) / 2 << ")'>" << escape(y_label) << "</text>";
    return s.str();
  }
};

std::string legend(const std::vector<Series>& series) {
  std::ostringstream s;
  double x = kLeft + 10;
  for (const Series& se : series) {
    s << "<rect x='" << x << "' y='8' width='12' height='12' fill='" << se.color << "'/><text x='"
      << x + 16 << "' y='18'>" << escape(se.name) << "</text>";
    x += 30 + 7.0 * static_cast<double>(se.name.size());
  }
  return s.str();
}

std::string figure(const std::string& id, const std::string& title, const std::string& body) {
  std::ostringstream s;
  s << "<figure data-chart='" << id << "'><figcaption>" << escape(title)
    << "</figcaption><svg viewBox='0 0 " << kWidth << " " << kHeight << "' width='" << kWidth
    << "' height='" << kHeight << "'>" << body << "</svg></figure>\n";
  return s.str();
}

std::string line_chart(const std::string& id, const std::string& title, const std::string& x_label,
                       const std::string& y_label, const std::vector<Series>& series) {
  Axes ax{1e300, -1e300, 0, -1e300};
  double lowest = 1e300;
  for (const Series& se : series) {
    for (const auto& [x, y] : se.points) {
      ax.x0 = std::min(ax.x0, x);
      ax.x1 = std::max(ax.x1, x);
      ax.y1 = std::max(ax.y1, y);
      lowest = std::min(lowest, y);
    }
  }
  // Losses sit far from 0: start the axis near the data so the curves' shape shows.
  ax.y0 = lowest > 0 && lowest > 0.5 * ax.y1 ? lowest - 0.05 * (ax.y1 - lowest) : 0;
  if (ax.y1 <= ax.y0) ax.y1 = ax.y0 + 1;
  std::ostringstream s;
  s << ax.frame(x_label, y_label) << legend(series);
  for (const Series& se : series) {
    // The second series dashed: arms that agree draw one curve over the other.
    s << "<polyline class='mark' fill='none' stroke-width='2' stroke='" << se.color << "'"
      << (&se == &series.front() ? "" : " stroke-dasharray='6 4'") << " points='";
    for (const auto& [x, y] : se.points) s << ax.px(x) << "," << ax.py(y) << " ";
    s << "'/>";
    for (const auto& [x, y] : se.points) {
      s << "<circle class='mark' r='2.5' fill='" << se.color << "' cx='" << ax.px(x) << "' cy='"
        << ax.py(y) << "'><title>" << escape(se.name) << ": " << num(x) << ", " << num(y)
        << "</title></circle>";
    }
  }
  return figure(id, title, s.str());
}

// Grouped bars: one group per category, one bar per series (its points' y by category index).
std::string bar_chart(const std::string& id, const std::string& title, const std::string& y_label,
                      const std::vector<std::string>& categories,
                      const std::vector<Series>& series) {
  Axes ax{0, static_cast<double>(categories.size()), 0, 0};
  for (const Series& se : series) {
    for (const auto& p : se.points) ax.y1 = std::max(ax.y1, p.second);
  }
  if (ax.y1 <= 0) ax.y1 = 1;
  std::ostringstream s;
  s << ax.frame("", y_label, /*x_ticks=*/false) << legend(series);
  const double group = (kWidth - kLeft - kRight) / std::max<double>(1, categories.size());
  const double bar = group * 0.8 / std::max<double>(1, series.size());
  for (size_t c = 0; c < categories.size(); ++c) {
    s << "<text x='" << kLeft + group * (c + 0.5) << "' y='" << kHeight - kBottom + 16
      << "' text-anchor='middle' font-size='10'>" << escape(categories[c]) << "</text>";
  }
  for (size_t i = 0; i < series.size(); ++i) {
    for (const auto& [x, y] : series[i].points) {
      const double left = kLeft + group * x + group * 0.1 + bar * static_cast<double>(i);
      s << "<rect class='mark' x='" << left << "' y='" << ax.py(y) << "' width='" << bar
        << "' height='" << std::max(0.5, ax.py(0) - ax.py(y)) << "' fill='" << series[i].color
        << "'><title>" << escape(series[i].name) << " "
        << escape(categories.at(static_cast<size_t>(x))) << ": " << num(y) << "</title></rect>";
    }
  }
  return figure(id, title, s.str());
}

// p10-p90 boxes with the median, and every step as a dot, one row per arm.
std::string distribution_chart(const AbResult& r) {
  Axes ax{0, 1, 0, 0};
  ax.y1 = 0;
  for (const ArmResult* arm : {&r.a, &r.b}) {
    for (double v : arm->step_s) ax.y1 = std::max(ax.y1, v);
  }
  ax.y1 = ax.y1 > 0 ? ax.y1 * 1.05 : 1;
  std::ostringstream s;
  s << ax.frame("", "step time (s)", /*x_ticks=*/false);
  int i = 0;
  for (const ArmResult* arm : {&r.a, &r.b}) {
    const double center = ax.px(i == 0 ? 0.3 : 0.7), half = 60;
    const char* color = kArmColors[i++];
    s << "<rect class='mark' x='" << center - half << "' y='" << ax.py(arm->p90_s) << "' width='"
      << 2 * half << "' height='" << std::max(1.0, ax.py(arm->p10_s) - ax.py(arm->p90_s))
      << "' fill='" << color << "' fill-opacity='0.25' stroke='" << color << "'/><line x1='"
      << center - half << "' x2='" << center + half << "' y1='" << ax.py(arm->median_s) << "' y2='"
      << ax.py(arm->median_s) << "' stroke='" << color << "' stroke-width='3'/><text x='" << center
      << "' y='" << kHeight - kBottom + 16 << "' text-anchor='middle'>"
      << escape(arm->arm.name + ": " + arm->label) << "</text>";
    for (size_t k = 0; k < arm->step_s.size(); ++k) {
      const double jitter = (static_cast<double>(k % 9) - 4) * 6;
      s << "<circle class='mark' r='2' fill='" << color << "' cx='" << center + jitter << "' cy='"
        << ax.py(arm->step_s[k]) << "'/>";
    }
  }
  return figure("distribution", "step time distribution (box: p10-p90, line: median)", s.str());
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
    for (const StepRecord& s : arm->runs.front().steps)
      se.points.push_back({static_cast<double>(s.step), s.loss});
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
  return bar_chart("memory", "memory by category per rank (MiB, last step of run 1)", "MiB",
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
  return bytes ? bar_chart("comm-bytes", "collective MiB per step", "MiB", ops, series)
               : bar_chart("comm", "collective calls per step", "calls", ops, series);
}

std::string arm_rows(const AbResult& r) {
  std::ostringstream s;
  char buf[512];
  for (const ArmResult* arm : {&r.a, &r.b}) {
    std::snprintf(buf, sizeof(buf),
                  "<tr><td>%s</td><td>%s</td><td>%zu</td><td>%.4f</td><td>%.4f</td><td>%.4f</td>"
                  "<td>%.1f</td><td>%.1f</td><td>%.1f</td></tr>",
                  escape(arm->arm.name).c_str(), escape(arm->label).c_str(), arm->step_s.size(),
                  arm->median_s, arm->p10_s, arm->p90_s, arm->tokens_per_s,
                  arm->peak_model_states / 1048576.0, arm->peak_rss / 1048576.0);
    s << buf;
  }
  return s.str();
}

// Runs in the viewer's browser: counts the charts whose marks have a size on the page, and
// records any script error, at the foot of the page and on <body> (the Chromium test reads it).
const char* kSelfCheck = R"(<script>
(function () {
  var errors = [];
  window.addEventListener('error', function (e) { errors.push(String(e.message)); });
  window.addEventListener('load', function () {
    var figures = document.querySelectorAll('figure[data-chart]');
    var drawn = 0;
    figures.forEach(function (f) {
      var marks = f.querySelectorAll('.mark');
      for (var i = 0; i < marks.length; ++i) {
        var box = marks[i].getBoundingClientRect();
        if (box.width > 0 && box.height > 0) { ++drawn; break; }
      }
    });
    document.body.setAttribute('data-charts-drawn', drawn + '/' + figures.length);
    document.body.setAttribute('data-script-errors', String(errors.length));
    document.getElementById('self-check').textContent =
        drawn + ' of ' + figures.length + ' charts drawn; ' + errors.length + ' script errors';
  });
})();
</script>)";

}  // namespace

std::string ab_html(const AbResult& r) {
  std::ostringstream s;
  const bool diverged = r.agreement.checked && !r.agreement.agree;
  s << "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>zt A/B: "
    << escape(r.b.label) << " vs " << escape(r.a.label) << "</title><style>"
    << "body{font-family:sans-serif;margin:24px;color:#222;max-width:820px}"
    << ".verdict{padding:12px;border-radius:6px;background:"
    << (diverged ? "#fde2e2;border:2px solid #d62728" : "#e8f4ea;border:1px solid #6a6") << "}"
    << "table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 8px;"
    << "text-align:right}svg text{font-size:11px}figure{margin:18px 0}"
    << "figcaption{font-weight:bold;margin-bottom:4px}</style></head><body>\n"
    << "<h1>A/B: " << escape(r.b.label) << " vs " << escape(r.a.label) << "</h1>\n"
    << "<p class='verdict'>" << escape(r.verdict) << "</p>\n"
    << "<table><tr><th>arm</th><th>overrides</th><th>steps timed</th><th>median s</th>"
    << "<th>p10 s</th><th>p90 s</th><th>tokens/s</th><th>model states/rank MiB</th>"
    << "<th>peak RSS MiB</th></tr>" << arm_rows(r) << "</table>\n"
    << "<p>Warm-up steps left out of the timings, per run: " << r.warmup_steps
    << ". Speed: median step time of A over B, 95% bootstrap interval [" << num(r.speedup.low)
    << ", " << num(r.speedup.high) << "].</p>\n"
    << line_chart("step-time", "step time per step (runs in the order they ran, warm-up left out)",
                  "timed step", "seconds", step_time_series(r))
    << distribution_chart(r) << memory_chart(r) << comm_chart(r, false) << comm_chart(r, true)
    << line_chart("loss", "loss per step, both arms overlaid", "step", "loss", loss_series(r))
    << "<p id='self-check'>charts not checked (scripts off)</p>\n"
    << kSelfCheck << "\n</body></html>\n";
  return s.str();
}

void write_ab_html(const AbResult& r, const std::string& path) {
  write_report_file(path, ab_html(r));
}

}  // namespace zt::trainer
