#include "kareus/report/report.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "kareus/common/file_io.h"
#include "kareus/planner/plan_simulator.h"
#include "kareus/report/svg_plot.h"

namespace kareus::report {
namespace {

const char* method_color(planner::Method method) {
  if (method == planner::Method::kMegatron) return "#555555";
  if (method == planner::Method::kPerseus) return "#1f77b4";
  if (method == planner::Method::kNanobatchPerseus) return "#ff7f0e";
  return "#2ca02c";
}

std::string percent(const std::optional<double>& value) { return value ? fmt::format("{:+.1f}%", *value) : "&ndash;"; }

std::string comparison_table(const planner::PlanJobResult& result, int gpus) {
  std::string html =
      "<table><tr><th>method</th><th>fastest time (s)</th><th>its energy (J)</th><th>avg power (W/GPU)</th>"
      "<th>max-throughput time</th><th>max-throughput energy</th><th>iso-time energy</th><th>iso-energy time</th>"
      "<th>frontier plans</th></tr>\n";
  for (std::size_t index = 0; index < result.methods.size(); ++index) {
    const planner::MethodResult& method = result.methods[index];
    const planner::Comparison& metrics = result.comparison[index].second;
    const planner::MethodPoint& fastest = method.frontier.front();
    html += fmt::format(
        "<tr><td>{}</td><td>{:.3f}</td><td>{:.0f}</td><td>{:.1f}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>\n",
        planner::to_string(method.method), fastest.time_s, fastest.energy_j, fastest.energy_j / (fastest.time_s * gpus),
        percent(metrics.max_throughput_time_reduction_pct), percent(metrics.max_throughput_energy_reduction_pct),
        percent(metrics.iso_time_energy_reduction_pct), percent(metrics.iso_energy_time_reduction_pct),
        method.frontier.size());
  }
  return html + "</table>\n";
}

std::string frontier_plot(const planner::PlanJobResult& result) {
  std::vector<Series> series;
  for (const planner::MethodResult& method : result.methods) {
    Series achieved{std::string(planner::to_string(method.method)), method_color(method.method), {}, true, true};
    for (const planner::MethodPoint& point : method.frontier)
      achieved.points.emplace_back(point.time_s, point.energy_j / 1e3);
    series.push_back(std::move(achieved));
  }
  return line_chart(series,
                    {"Iteration time-energy frontiers", "iteration time (s)", "energy per iteration, all GPUs (kJ)"});
}

/// The timeline's legend: a swatch per clock the plan uses (at most kMaxLegendClocks, spread
/// evenly from the highest to the lowest when it uses more), then what a star means.
std::vector<LegendEntry> clock_legend(const std::set<int>& clocks_mhz, bool any_sequential) {
  constexpr std::size_t kMaxLegendClocks = 8;
  const std::vector<int> descending(clocks_mhz.rbegin(), clocks_mhz.rend());
  const int high = descending.front(), low = descending.back();
  std::vector<LegendEntry> legend;
  const std::size_t shown = std::min(descending.size(), kMaxLegendClocks);
  for (std::size_t entry = 0; entry < shown; ++entry) {
    const std::size_t index = shown == 1 ? 0 : entry * (descending.size() - 1) / (shown - 1);
    const int clock = descending[index];
    legend.push_back({fmt::format("{} MHz", clock), heat_color(clock, low, high)});
  }
  if (any_sequential) legend.push_back({"* not nanobatched", ""});
  return legend;
}

std::string timeline_plot(const planner::PlanJobResult& result) {
  const planner::MethodResult* chosen = nullptr;
  for (const planner::MethodResult& method : result.methods) {
    if (method.method == planner::Method::kKareus || (chosen == nullptr && !method.frontier.empty())) chosen = &method;
  }
  if (chosen == nullptr || chosen->frontier.empty()) return "<p>no plan to show</p>";
  const plan::Plan& plan = chosen->frontier.front().plan;
  const pipeline::IterationRun& run = chosen->frontier.front().run;
  std::set<int> clocks_mhz;
  for (const plan::StagePlan& stage : plan.stages) {
    for (const plan::PlannedInstruction& instruction : stage.instructions) clocks_mhz.insert(instruction.freq_mhz);
  }
  if (clocks_mhz.empty()) return "<p>no plan to show</p>";
  const int low = *clocks_mhz.begin(), high = *clocks_mhz.rbegin();
  bool any_sequential = false;
  const bool interleaved = plan::chunk_count(plan) > 1;
  std::vector<TimelineBar> bars;
  std::vector<std::string> rows;
  for (const pipeline::StageRun& stage : run.stages) {
    rows.push_back(fmt::format("stage {}", stage.stage));
    for (std::size_t index = 0; index < stage.instructions.size(); ++index) {
      const pipeline::ScheduledInstruction& scheduled = stage.instructions[index];
      const plan::PlannedInstruction& planned = plan.stages[stage.stage].instructions[index];
      const int clock = planned.freq_mhz;
      const bool forward = scheduled.instruction.type == Direction::kForward;
      // A plan may run some instructions without nanobatching: they are marked with a star.
      const bool nanobatched = plan::effective_overlap(planned) == workload::OverlapMode::kNanobatch;
      any_sequential = any_sequential || !nanobatched;
      // Interleaved: "F3c1" is microbatch 3's forward on the stage's model chunk 1.
      const std::string chunk = interleaved ? fmt::format("c{}", scheduled.instruction.chunk) : "";
      const std::string label =
          fmt::format("{}{}{}{}", forward ? "F" : "B", scheduled.instruction.microbatch, chunk, nanobatched ? "" : "*");
      const std::string what = interleaved ? fmt::format(" (microbatch {}, chunk {})", scheduled.instruction.microbatch,
                                                         scheduled.instruction.chunk)
                                           : "";
      bars.push_back(
          {stage.stage, scheduled.start_s, scheduled.end_s, label, heat_color(clock, low, high),
           fmt::format("{}{} {:.3f}-{:.3f} s at {} MHz, {}, {:.1f} J/GPU", label, what, scheduled.start_s,
                       scheduled.end_s, clock, nanobatched ? "nanobatched" : "not nanobatched", scheduled.energy_j)});
    }
  }
  ChartOptions options{
      fmt::format("Pipeline timeline: {} fastest plan ({:.3f} s)", planner::to_string(chosen->method), run.time_s),
      "time (s)", "", 900, 80 + 44 * static_cast<int>(rows.size())};
  return timeline_chart(bars, rows, clock_legend(clocks_mhz, any_sequential), options);
}

std::string partition_plots(const device::GpuSpec& gpu, const planner::PlanJobResult& result) {
  std::string html;
  for (const auto& [key, measured] : result.measurements) {
    // Every measured config as a dot (thinned to ~600), and the (time, energy) front.
    Series all{"configs", "#bbbbbb", {}, false, true};
    const std::size_t stride = std::max<std::size_t>(1, measured.size() / 600);
    for (std::size_t index = 0; index < measured.size(); index += stride) {
      all.points.emplace_back(measured[index].time_s * 1e3, measured[index].energy_j);
    }
    Series front{"Pareto front (t, E)", "#2ca02c", {}, true, true};
    for (const search::Evaluation& point :
         search::pareto_front(measured, gpu.static_power_w, search::Objective::kEnergy)) {
      front.points.emplace_back(point.time_s * 1e3, point.energy_j);
    }
    html += line_chart({all, front},
                       {fmt::format("{} ({} configs, static power {} W)", key, measured.size(), gpu.static_power_w),
                        "time (ms)", "energy (J, one GPU)", 560, 340});
  }
  return html;
}

}  // namespace

std::string render_report(const device::GpuSpec& gpu, const workload::Workload& workload,
                          const planner::PlanJobResult& result) {
  const workload::Parallelism& p = workload.parallel;
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kareus plan: {0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:24px;max-width:1200px}}table{{border-collapse:collapse}}"
      "td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child{{text-align:left}}"
      "svg{{margin:8px 8px 8px 0}}</style></head><body>\n"
      "<h1>kareus plan: {0}</h1>\n<p>{1}: TP {2}, CP {3}, PP {4}{10}, DP {5}, microbatch {6}, sequence {7}, {8} "
      "microbatches, {9} GPUs. Time is the iteration time; energy is the whole job's for one iteration. "
      "Max-throughput metrics are against megatron, iso metrics against perseus (docs/metrics.md).</p>\n",
      escape_xml(workload.model.name), escape_xml(gpu.name), p.tp, p.cp, p.pp, p.dp, p.mbs, p.seq, p.microbatches,
      workload.gpus(), p.vpp > 1 ? fmt::format(" (interleaved, {} chunks per stage)", p.vpp) : "");
  html += "<h2>Comparison</h2>\n" + comparison_table(result, workload.gpus());
  html += "<h2>Frontiers</h2>\n" + frontier_plot(result);
  html += "<h2>Pipeline timeline</h2>\n" + timeline_plot(result);
  if (!result.measurements.empty()) html += "<h2>Partition fronts</h2>\n" + partition_plots(gpu, result);
  return html + "</body></html>\n";
}

void write_report(const std::filesystem::path& dir, const device::GpuSpec& gpu, const workload::Workload& workload,
                  const planner::PlanJobResult& result) {
  write_file_atomic(dir / "report.html", render_report(gpu, workload, result));
}

}  // namespace kareus::report
