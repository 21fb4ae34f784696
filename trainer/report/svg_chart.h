// The charts of zt's HTML reports (the A/B report, a run's report): inline SVG drawn here, so a
// report is one self-contained file that needs no network and no library to view. Axes get round
// ticks (1-2-5 steps; whole numbers where the axis counts steps), and a few lines of script
// (kSelfCheck) check in the viewer's browser that every chart drew its marks, which the headless
// Chromium tests read.
// Thread safety: free functions of their inputs.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace zt::trainer::svg {

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;  // (x, y); bars use x as the category index
};

// A vertical line across a chart at x (a checkpoint, a restart, an A/B switch).
struct Marker {
  double x = 0;
  std::string label;
  std::string color;
};

// The plot area of every chart (pixels) and the mapping of data onto it, for charts drawn by
// the caller: set the ranges, round() them to their ticks, then draw with px/py.
inline constexpr double kWidth = 760, kHeight = 260;
inline constexpr double kLeft = 70, kRight = 20, kTop = 30, kBottom = 40;
struct Axes {
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  std::vector<double> x_ticks, y_ticks;

  double px(double x) const;
  double py(double y) const;
  // Widens the ranges to their outer round ticks (the x axis only `with_x`; whole steps there
  // when `whole_x`).
  void round(bool whole_x, bool with_x);
  // Both axes with their ticks and labels.
  std::string frame(const std::string& x_label, const std::string& y_label) const;
  std::string markers(const std::vector<Marker>& list) const;
};

// The colours series take in order.
const std::vector<std::string>& palette();

// HTML-escaped text.
std::string escape(const std::string& s);
// A number as a tick or a tooltip shows it: 4 significant digits.
std::string num(double v);
// Round tick values covering [lo, hi]: about `target` of them, spaced 1, 2 or 5 times a power of
// ten (at least 1 apart when `whole`), from a multiple of the spacing at or below lo to one at or
// above hi.
std::vector<double> nice_ticks(double lo, double hi, int target = 5, bool whole = false);

// Lines with a dot per point; the x axis counts steps when `whole_x`.
std::string line_chart(const std::string& id, const std::string& title, const std::string& x_label,
                       const std::string& y_label, const std::vector<Series>& series,
                       const std::vector<Marker>& markers = {}, bool whole_x = false);
// Grouped bars: one group per category, one bar per series (its points' y by category index).
std::string bar_chart(const std::string& id, const std::string& title, const std::string& y_label,
                      const std::vector<std::string>& categories,
                      const std::vector<Series>& series);
// A bar per x (a step) split into the series stacked bottom to top; each series has a point per x.
std::string stacked_chart(const std::string& id, const std::string& title,
                          const std::string& x_label, const std::string& y_label,
                          const std::vector<Series>& series,
                          const std::vector<Marker>& markers = {});
// <figure data-chart=id> around an SVG body of the charts' size (for charts drawn by the caller).
std::string figure(const std::string& id, const std::string& title, const std::string& body);

// The page's <head> with its styles, <body> opened; and its foot: the self-check line and script.
std::string page_head(const std::string& title);
std::string page_foot();

}  // namespace zt::trainer::svg
