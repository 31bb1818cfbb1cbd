#include "kareus/report/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace kareus::report {
namespace {

constexpr int kLeft = 80, kRight = 150, kTop = 40, kBottom = 55;
constexpr int kLegendRowPx = 18;
constexpr double kTitleFontPx = 15, kTitleMinFontPx = 11, kTitleMarginPx = 10;
/// Average advance of a bold sans-serif glyph, in ems: generous, so estimates err towards fitting.
constexpr double kBoldGlyphEm = 0.62;

/// The title's <text>: at the plot's left edge in 15 px when it fits; otherwise from the chart's
/// left margin, in a smaller font, and with textLength as the last resort so the browser squeezes
/// it into the chart rather than clipping it.
std::string title_text(const std::string& title, int chart_width) {
  const double glyphs = static_cast<double>(title.size());
  double font_px = kTitleFontPx;
  double x = kLeft;
  if (x + glyphs * kBoldGlyphEm * font_px > chart_width - kTitleMarginPx) {
    x = kTitleMarginPx;
    const double available = chart_width - 2 * kTitleMarginPx;
    font_px = std::clamp(available / (glyphs * kBoldGlyphEm), kTitleMinFontPx, kTitleFontPx);
    if (glyphs * kBoldGlyphEm * font_px > available) {
      return fmt::format(
          "<text x=\"{}\" y=\"22\" font-size=\"{:.1f}\" font-weight=\"bold\" textLength=\"{:.0f}\" "
          "lengthAdjust=\"spacingAndGlyphs\">{}</text>\n",
          x, font_px, available, escape_xml(title));
    }
  }
  return fmt::format("<text x=\"{}\" y=\"22\" font-size=\"{:.1f}\" font-weight=\"bold\">{}</text>\n", x, font_px,
                     escape_xml(title));
}

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  void add(double value) {
    low = std::min(low, value);
    high = std::max(high, value);
  }
  /// Padded so points do not sit on the frame; a single value gets a band around it.
  void pad() {
    const double span = high > low ? high - low : std::max(std::fabs(low) * 0.05, 1e-9);
    low -= 0.05 * span;
    high += 0.05 * span;
  }
};

/// About five round tick values in [low, high].
std::vector<double> ticks(double low, double high) {
  const double raw = (high - low) / 5;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= factor * magnitude) {
      step = factor * magnitude;
      break;
    }
  }
  std::vector<double> values;
  for (double value = std::ceil(low / step) * step; value <= high + 1e-9 * step; value += step) values.push_back(value);
  return values;
}

std::string frame(const ChartOptions& options, const Range& x, const Range* y, double plot_w, double plot_h) {
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      options.width, options.height);
  svg += title_text(options.title, options.width);
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", kLeft,
                     kTop, plot_w, plot_h);
  for (double value : ticks(x.low, x.high)) {
    const double px = kLeft + (value - x.low) / (x.high - x.low) * plot_w;
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        px, kTop, kTop + plot_h, kTop + plot_h + 16, value);
  }
  if (y != nullptr) {
    for (double value : ticks(y->low, y->high)) {
      const double py = kTop + plot_h - (value - y->low) / (y->high - y->low) * plot_h;
      svg += fmt::format(
          "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
          "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
          kLeft, kLeft + plot_w, py, kLeft - 6, py + 4, value);
    }
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", kLeft + plot_w / 2,
                     options.height - 12, escape_xml(options.x_label));
  svg += fmt::format("<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                     kTop + plot_h / 2, escape_xml(options.y_label));
  return svg;
}

}  // namespace

std::string escape_xml(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string heat_color(double value, double low, double high) {
  const double t = high > low ? std::clamp((value - low) / (high - low), 0.0, 1.0) : 1.0;
  const int red = static_cast<int>(40 + 200 * t);
  const int blue = static_cast<int>(220 - 180 * t);
  return fmt::format("rgb({},{},{})", red, 70, blue);
}

std::string line_chart(const std::vector<Series>& series, const ChartOptions& options) {
  Range x, y;
  for (const Series& one : series) {
    for (const auto& [px, py] : one.points) {
      x.add(px);
      y.add(py);
    }
  }
  const double plot_w = options.width - kLeft - kRight;
  const double plot_h = options.height - kTop - kBottom;
  if (x.low > x.high) {
    ChartOptions empty = options;
    empty.title += " (no data)";
    Range unit{0, 1};
    return frame(empty, unit, &unit, plot_w, plot_h) + "</svg>\n";
  }
  x.pad();
  y.pad();
  std::string svg = frame(options, x, &y, plot_w, plot_h);
  auto to_px = [&](double value) { return kLeft + (value - x.low) / (x.high - x.low) * plot_w; };
  auto to_py = [&](double value) { return kTop + plot_h - (value - y.low) / (y.high - y.low) * plot_h; };
  int legend_row = 0;
  for (const Series& one : series) {
    if (one.line && one.points.size() > 1) {
      std::string path;
      for (const auto& [px, py] : one.points) path += fmt::format("{:.1f},{:.1f} ", to_px(px), to_py(py));
      svg +=
          fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" points=\"{}\"/>\n", one.color, path);
    }
    if (one.markers) {
      for (const auto& [px, py] : one.points) {
        svg += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.2\" fill=\"{}\"><title>{}: {:.4g}, {:.4g}</title></circle>\n",
            to_px(px), to_py(py), one.color, escape_xml(one.name), px, py);
      }
    }
    const double ly = kTop + 14 + kLegendRowPx * legend_row++;
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{:.1f}\">{}</text>\n",
        kLeft + plot_w + 12, ly - 10, one.color, kLeft + plot_w + 30, ly, escape_xml(one.name));
  }
  return svg + "</svg>\n";
}

std::string timeline_chart(const std::vector<TimelineBar>& bars, const std::vector<std::string>& row_names,
                           const std::vector<LegendEntry>& legend, ChartOptions options) {
  options.height = std::max(options.height, kTop + 4 + kLegendRowPx * static_cast<int>(legend.size()));
  Range x;
  for (const TimelineBar& bar : bars) {
    x.add(bar.start);
    x.add(bar.end);
  }
  if (x.low > x.high) x = {0, 1};
  const double plot_w = options.width - kLeft - kRight;
  const double plot_h = options.height - kTop - kBottom;
  std::string svg = frame(options, x, nullptr, plot_w, plot_h);
  const double row_h = plot_h / std::max<std::size_t>(row_names.size(), 1);
  for (std::size_t row = 0; row < row_names.size(); ++row) {
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6,
                       kTop + row_h * (row + 0.5) + 4, escape_xml(row_names[row]));
  }
  for (const TimelineBar& bar : bars) {
    const double px = kLeft + (bar.start - x.low) / (x.high - x.low) * plot_w;
    const double width = std::max((bar.end - bar.start) / (x.high - x.low) * plot_w, 0.5);
    const double py = kTop + row_h * bar.row + 3;
    svg += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"white\" "
        "stroke-width=\"0.5\"><title>{}</title></rect>\n",
        px, py, width, row_h - 6, bar.color, escape_xml(bar.tooltip));
    if (width > 7.0 * bar.label.size()) {
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"white\" font-size=\"10\">{}</text>\n",
          px + width / 2, py + (row_h - 6) / 2 + 4, escape_xml(bar.label));
    }
  }
  for (std::size_t row = 0; row < legend.size(); ++row) {
    const double ly = kTop + 14 + kLegendRowPx * static_cast<double>(row);
    const LegendEntry& entry = legend[row];
    if (!entry.color.empty()) {
      svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>", kLeft + plot_w + 12,
                         ly - 10, entry.color);
    }
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", kLeft + plot_w + 30, ly, escape_xml(entry.label));
  }
  return svg + "</svg>\n";
}

}  // namespace kareus::report
