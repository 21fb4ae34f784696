#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>

namespace zt::trainer::svg {

namespace {

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

// The most marks a series draws: a run of 100k steps drew a circle and its tooltip per step
// (150 MB of page, minutes to build); past this, each mark is the mean of the points in a bucket
// `width` wide on x.
constexpr size_t kMostMarks = 2000;

using Points = std::vector<std::pair<double, double>>;

// `points` (in x order) as one mean point per bucket [x0 + b * width, x0 + (b + 1) * width),
// placed at the bucket's middle step (so every series of a stack puts its bucket at the same x).
Points thinned(const Points& points, double x0, double width) {
  if (width <= 1) return points;
  Points out;
  double sum = 0;
  int64_t count = 0, bucket = -1;
  const auto flush = [&] {
    if (count > 0) out.push_back({x0 + bucket * width + (width - 1) / 2, sum / count});
    sum = 0;
    count = 0;
  };
  for (const auto& [x, y] : points) {
    const auto b = static_cast<int64_t>(std::floor((x - x0) / width));
    if (b != bucket) flush();
    bucket = b;
    sum += y;
    ++count;
  }
  flush();
  return out;
}

// The bucket width that leaves at most kMostMarks buckets over [x0, x1] of whole steps.
double bucket_width(double x0, double x1) {
  const double span = x1 - x0 + 1;
  if (!std::isfinite(span) || span <= static_cast<double>(kMostMarks)) return 1;
  return std::ceil(span / static_cast<double>(kMostMarks));
}

}  // namespace

double Axes::px(double x) const {
  return kLeft + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (kWidth - kLeft - kRight);
}

double Axes::py(double y) const {
  return kHeight - kBottom - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * (kHeight - kTop - kBottom);
}

void Axes::round(bool whole_x, bool with_x) {
  y_ticks = nice_ticks(y0, y1);
  y0 = y_ticks.front();
  y1 = y_ticks.back();
  if (!with_x) return;
  x_ticks = nice_ticks(x0, x1, 6, whole_x);
  x0 = std::min(x0, x_ticks.front());
  x1 = std::max(x1, x_ticks.back());
}

std::string Axes::frame(const std::string& x_label, const std::string& y_label) const {
  std::ostringstream s;
  s << "<line x1='" << kLeft << "' y1='" << kHeight - kBottom << "' x2='" << kWidth - kRight
    << "' y2='" << kHeight - kBottom << "' stroke='#444'/>"
    << "<line x1='" << kLeft << "' y1='" << kTop << "' x2='" << kLeft << "' y2='"
    << kHeight - kBottom << "' stroke='#444'/>";
  for (double y : y_ticks) {
    s << "<text class='tick' x='" << kLeft - 6 << "' y='" << py(y) + 4 << "' text-anchor='end'>"
      << num(y) << "</text><line x1='" << kLeft << "' y1='" << py(y) << "' x2='" << kWidth - kRight
      << "' y2='" << py(y) << "' stroke='#eee'/>";
  }
  for (double x : x_ticks) {
    s << "<text class='tick' x='" << px(x) << "' y='" << kHeight - kBottom + 16
      << "' text-anchor='middle'>" << num(x) << "</text>";
  }
  s << "<text x='" << (kLeft + kWidth - kRight) / 2 << "' y='" << kHeight - 6
    << "' text-anchor='middle'>" << escape(x_label) << "</text><text x='14' y='"
    << (kTop + kHeight - kBottom) / 2 << "' text-anchor='middle' transform='rotate(-90 14 "
    << (kTop + kHeight - kBottom) / 2 << ")'>" << escape(y_label) << "</text>";
  return s.str();
}

std::string Axes::markers(const std::vector<Marker>& list) const {
  std::ostringstream s;
  for (const Marker& m : list) {
    if (m.x < x0 || m.x > x1) continue;
    s << "<line class='marker' x1='" << px(m.x) << "' x2='" << px(m.x) << "' y1='" << kTop
      << "' y2='" << kHeight - kBottom << "' stroke='" << m.color
      << "' stroke-dasharray='3 3'><title>" << escape(m.label) << "</title></line><text x='"
      << px(m.x) + 3 << "' y='" << kTop + 10 << "' font-size='9' fill='" << m.color << "'>"
      << escape(m.label) << "</text>";
  }
  return s.str();
}

const std::vector<std::string>& palette() {
  static const std::vector<std::string> colors = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  return colors;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  if (std::abs(v) < 1e-12) v = 0;
  // Whole numbers as they are (10000, not 1e+04), up to where digits stop helping.
  if (v == std::round(v) && std::abs(v) < 1e9) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.4g", v);
  }
  return buf;
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool whole) {
  // A metrics file others made may hold any number: where no tick step exists (infinite or
  // NaN bounds, a span that overflows), the axis is the two bounds, or [0, 1].
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0.0, 1.0};
  if (!(hi > lo)) hi = lo + (whole ? 1 : std::max(1.0, std::abs(lo)));
  const double raw = (hi - lo) / std::max(1, target);
  if (!std::isfinite(raw) || !(raw > 0)) return {lo, hi};
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    step = f * power;
    if (step >= raw) break;
  }
  if (whole) step = std::max(1.0, std::round(step));
  const double first = std::floor(lo / step + 1e-9) * step;
  std::vector<double> ticks;
  for (double t = first; t < hi + step * 0.999; t += step) {
    // Rounded to the step's precision, so 0.30000000000000004 prints as 0.3.
    ticks.push_back(std::round(t / step) * step);
    if (ticks.size() > 100) break;
  }
  if (ticks.empty()) return {lo, hi};  // a step too small to move past lo
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string figure(const std::string& id, const std::string& title, const std::string& body) {
  std::ostringstream s;
  s << "<figure data-chart='" << id << "'><figcaption>" << escape(title)
    << "</figcaption><svg viewBox='0 0 " << kWidth << " " << kHeight << "' width='" << kWidth
    << "' height='" << kHeight << "'>" << body << "</svg></figure>\n";
  return s.str();
}

std::string line_chart(const std::string& id, const std::string& title, const std::string& x_label,
                       const std::string& y_label, const std::vector<Series>& series,
                       const std::vector<Marker>& markers, bool whole_x) {
  Axes ax{1e300, -1e300, 0, -1e300, {}, {}};
  double lowest = 1e300;
  for (const Series& se : series) {
    for (const auto& [x, y] : se.points) {
      ax.x0 = std::min(ax.x0, x);
      ax.x1 = std::max(ax.x1, x);
      ax.y1 = std::max(ax.y1, y);
      lowest = std::min(lowest, y);
    }
  }
  if (ax.x0 > ax.x1) ax.x0 = ax.x1 = 0;
  if (ax.y1 < -1e299) {  // no points: an empty [0, 1]
    ax.y1 = 1;
    lowest = 0;
  }
  // Losses sit far from 0: start the axis near the data so the curves' shape shows. Negative
  // values (a TorchScript model's own loss) take the axis below 0, which it always shows.
  ax.y0 = lowest > 0 && lowest > 0.5 * ax.y1 ? lowest - 0.05 * (ax.y1 - lowest)
                                             : std::min(0.0, lowest);
  ax.y1 = std::max(ax.y1, lowest > 0 ? ax.y1 : 0.0);
  if (ax.y1 <= ax.y0) ax.y1 = ax.y0 + 1;
  const double first = ax.x0;
  // Only steps are bucketed: other axes (an A/B report's runs) have few points.
  const double width = whole_x ? bucket_width(ax.x0, ax.x1) : 1;
  ax.round(whole_x, true);
  std::ostringstream s;
  s << ax.frame(x_label, y_label) << ax.markers(markers) << legend(series);
  for (const Series& whole : series) {
    Series se{whole.name, whole.color, thinned(whole.points, first, width)};
    // Later series dashed: series that agree draw one curve over the other.
    s << "<polyline class='mark' fill='none' stroke-width='2' stroke='" << se.color << "'"
      << (&whole == &series.front() ? "" : " stroke-dasharray='6 4'") << " points='";
    for (const auto& [x, y] : se.points) s << ax.px(x) << "," << ax.py(y) << " ";
    s << "'/>";
    for (const auto& [x, y] : se.points) {
      s << "<circle class='mark' r='2.5' fill='" << se.color << "' cx='" << ax.px(x) << "' cy='"
        << ax.py(y) << "'><title>" << escape(se.name) << ": " << num(x) << ", " << num(y)
        << (width > 1 ? " (mean of " + num(width) + " steps)" : "") << "</title></circle>";
    }
  }
  return figure(id, title, s.str());
}

std::string bar_chart(const std::string& id, const std::string& title, const std::string& y_label,
                      const std::vector<std::string>& categories,
                      const std::vector<Series>& series) {
  Axes ax{0, static_cast<double>(categories.size()), 0, 0, {}, {}};
  for (const Series& se : series) {
    for (const auto& p : se.points) ax.y1 = std::max(ax.y1, p.second);
  }
  if (ax.y1 <= 0) ax.y1 = 1;
  ax.round(false, false);
  std::ostringstream s;
  s << ax.frame("", y_label) << legend(series);
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

std::string stacked_chart(const std::string& id, const std::string& title,
                          const std::string& x_label, const std::string& y_label,
                          const std::vector<Series>& series, const std::vector<Marker>& markers) {
  Axes ax{1e300, -1e300, 0, 0, {}, {}};
  for (const Series& se : series) {
    for (const auto& [x, y] : se.points) {
      ax.x0 = std::min(ax.x0, x);
      ax.x1 = std::max(ax.x1, x);
    }
  }
  if (ax.x0 > ax.x1) ax.x0 = ax.x1 = 0;
  // A bar per bucket of steps in a long run (kMostMarks), each part its mean there.
  const double width_steps = bucket_width(ax.x0, ax.x1);
  std::vector<Series> bars;
  for (const Series& se : series)
    bars.push_back({se.name, se.color, thinned(se.points, ax.x0, width_steps)});
  // x -> the running top of its stack (a map: a linear search per point was quadratic).
  std::map<double, double> tops;
  for (const Series& se : bars) {
    for (const auto& [x, y] : se.points) ax.y1 = std::max(ax.y1, tops[x] += std::max(0.0, y));
  }
  if (ax.y1 <= 0) ax.y1 = 1;
  const double first = ax.x0, last = ax.x1;
  ax.round(true, true);
  // The bars span the data's steps and half a step on each side (so the first and last bars
  // are whole), not out to the next round tick; ticks outside that are dropped.
  ax.x0 = first - 0.5;
  ax.x1 = last + 0.5;
  std::vector<double> inside;
  for (double t : ax.x_ticks)
    if (t >= ax.x0 && t <= ax.x1) inside.push_back(t);
  ax.x_ticks = inside;
  const double width = std::max(1.0, 0.8 * (ax.px(width_steps) - ax.px(0)));
  for (auto& t : tops) t.second = 0;
  std::ostringstream s;
  s << ax.frame(x_label, y_label) << ax.markers(markers) << legend(series);
  for (const Series& se : bars) {
    for (const auto& [x, y] : se.points) {
      double& base = tops[x];
      const double h = std::max(0.0, y);
      s << "<rect class='mark' x='" << ax.px(x) - width / 2 << "' y='" << ax.py(base + h)
        << "' width='" << width << "' height='" << std::max(0.0, ax.py(base) - ax.py(base + h))
        << "' fill='" << se.color << "'><title>" << num(x) << " " << escape(se.name) << ": "
        << num(y) << "</title></rect>";
      base += h;
    }
  }
  return figure(id, title, s.str());
}

std::string page_head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>" + escape(title) +
         "</title><style>body{font-family:sans-serif;margin:24px;color:#222;max-width:820px}"
         ".verdict{padding:12px;border-radius:6px;background:#e8f4ea;border:1px solid #6a6}"
         ".verdict.bad{background:#fde2e2;border:2px solid #d62728}"
         "table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px "
         "8px;text-align:right}svg text{font-size:11px}figure{margin:18px 0}"
         "figcaption{font-weight:bold;margin-bottom:4px}</style></head><body>\n";
}

// Runs in the viewer's browser: counts the charts whose marks have a size on the page, and
// records any script error, at the foot of the page and on <body> (the Chromium tests read it).
std::string page_foot() {
  return R"(<p id='self-check'>charts not checked (scripts off)</p>
<script>
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
</script>
</body></html>
)";
}

}  // namespace zt::trainer::svg
