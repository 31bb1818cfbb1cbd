// kareus/report/svg_plot.h - small, dependency-free SVG charts for the HTML report.
//
// A scatter/line chart with linear axes, ticks, a legend and tooltips (<title>), and a
// Gantt-style timeline with a legend. A title too long for the chart is set smaller, and
// squeezed to the chart's width if it still does not fit, so no title is ever clipped. Output is a standalone <svg>
// element; numbers are formatted in the units the caller names in the axis labels.
#pragma once

#include <string>
#include <vector>

namespace kareus::report {

struct Series {
  std::string name;
  std::string color;  ///< CSS color
  std::vector<std::pair<double, double>> points;
  bool line = true;     ///< connect points in order
  bool markers = true;  ///< draw a circle per point
};

struct ChartOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  int width = 720;
  int height = 420;
};

/// A chart of `series`; an empty chart (no points) says so in its title.
[[nodiscard]] std::string line_chart(const std::vector<Series>& series, const ChartOptions& options);

struct TimelineBar {
  int row = 0;  ///< e.g. pipeline stage
  double start = 0;
  double end = 0;
  std::string label;  ///< inside the bar when it fits
  std::string color;
  std::string tooltip;
};

/// One line of a timeline's legend: a colour swatch and its meaning, or text alone (empty color).
struct LegendEntry {
  std::string label;
  std::string color;
};

/// Rows of bars over a shared time axis; `row_names` labels the rows, `legend` is listed in the
/// right margin (the chart grows taller when the legend needs it).
[[nodiscard]] std::string timeline_chart(const std::vector<TimelineBar>& bars,
                                         const std::vector<std::string>& row_names,
                                         const std::vector<LegendEntry>& legend, ChartOptions options);

/// A color for `value` in [low, high] on a blue (low) to red (high) scale.
[[nodiscard]] std::string heat_color(double value, double low, double high);

/// Escapes &, <, >, " for text inside SVG/HTML.
[[nodiscard]] std::string escape_xml(const std::string& text);

}  // namespace kareus::report
