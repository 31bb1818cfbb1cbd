#include "kareus/report/svg_plot.h"

#include <gtest/gtest.h>

namespace kareus::report {
namespace {

int count(const std::string& text, const std::string& needle) {
  int found = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++found;
  return found;
}

TEST(SvgPlot, LineChartHasOneMarkerPerPointAndRoundTicks) {
  const std::string svg =
      line_chart({{"a", "red", {{4.5, 18}, {5, 20}, {6, 22}}, true, true}}, {"t", "time (s)", "energy (kJ)", 600, 400});
  EXPECT_EQ(count(svg, "<circle"), 3);
  EXPECT_EQ(count(svg, "<polyline"), 1);
  // x spans 4.425..6.075 after 5% padding: ticks every 0.5 from 4.5 to 6.
  for (const char* tick : {">4.5<", ">5<", ">5.5<", ">6<"}) EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_EQ(svg.find(">4<"), std::string::npos);
}

TEST(SvgPlot, EscapesTextAndSaysWhenEmpty) {
  EXPECT_EQ(escape_xml("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
  EXPECT_NE(line_chart({}, {"fronts", "x", "y"}).find("fronts (no data)"), std::string::npos);
}

TEST(SvgPlot, HeatColorRunsFromBlueToRed) {
  EXPECT_EQ(heat_color(900, 900, 1410), "rgb(40,70,220)");
  EXPECT_EQ(heat_color(1410, 900, 1410), "rgb(240,70,40)");
  EXPECT_EQ(heat_color(2000, 900, 1410), "rgb(240,70,40)");  // clamped
}

TEST(SvgPlot, TimelineDrawsEveryBarAndLabelsOnlyWideOnes) {
  const std::string svg = timeline_chart({{0, 0, 1, "F0", "red", "f"}, {1, 1, 1.001, "B0", "blue", "b"}},
                                         {"stage 0", "stage 1"}, {}, {"t", "time (s)", "", 800, 160});
  EXPECT_EQ(count(svg, "<rect x="), 3);  // the frame and two bars
  EXPECT_NE(svg.find(">F0</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">B0</text>"), std::string::npos);
}

TEST(SvgPlot, TimelineLegendListsEverySwatchAndGrowsTheChartToFit) {
  const std::vector<LegendEntry> legend = {
      {"1410 MHz", "red"}, {"1200 MHz", "purple"}, {"900 MHz", "blue"}, {"* not nanobatched", ""}};
  const std::string svg =
      timeline_chart({{0, 0, 1, "F0", "red", "f"}}, {"stage 0"}, legend, {"t", "time (s)", "", 800, 60});
  EXPECT_EQ(count(svg, "<rect x="), 2 + 3);  // the frame, one bar, three swatches (text-only entry has none)
  for (const LegendEntry& entry : legend) EXPECT_NE(svg.find(">" + entry.label + "</text>"), std::string::npos);
  // Four legend rows of 18 px below the 40 px title band need 40 + 4 + 72 = 116 px, not the 60 asked.
  EXPECT_NE(svg.find("height=\"116\""), std::string::npos);
}

TEST(SvgPlot, ATitleTooLongForTheChartIsSetSmallerAndSqueezedNeverClipped) {
  const std::string short_title = line_chart({}, {"fronts", "x", "y", 720, 400});
  EXPECT_NE(short_title.find("<text x=\"80\" y=\"22\" font-size=\"15.0\""), std::string::npos);
  // 70 glyphs with " (no data)": 80 + 70 x 0.62 em x 15 px = 731 px > 720 - 10, so the title moves to
  // the chart's margin, where 651 px fit the 700 available at full size.
  const std::string medium(60, 'm');
  const std::string medium_svg = line_chart({}, {medium, "x", "y", 720, 400});
  EXPECT_NE(medium_svg.find("<text x=\"10\" y=\"22\" font-size=\"15.0\""), std::string::npos);
  EXPECT_EQ(medium_svg.find("textLength"), std::string::npos);
  // 200 glyphs: even 11 px needs 200 x 0.62 x 11 = 1364 px > 700, so the browser squeezes it to 700.
  const std::string long_svg = line_chart({}, {std::string(190, 'm'), "x", "y", 720, 400});
  EXPECT_NE(long_svg.find("font-size=\"11.0\" font-weight=\"bold\" textLength=\"700\""), std::string::npos);
}

}  // namespace
}  // namespace kareus::report
