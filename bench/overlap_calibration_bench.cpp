// The emulator's overlap gain against the A100 runs (planner/overlap_calibration.h): the four
// ratios T(N+P fastest) / T(Perseus fastest) and iteration fits of a preset, then leave-one-out
// of the overlap fit (fit on three configurations, predict the fourth). Prints markdown tables
// for bench/RESULTS.md. Usage: overlap_calibration_bench [--gpu NAME|FILE] [NAME:MIN:MAX ...]
// (the parameters to fit, each with its range; default: planner::overlap_fit_parameters()).
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kareus/planner/overlap_calibration.h"

namespace {

using namespace kareus;

planner::BoundedParameter parse_parameter(const std::string& text) {
  const auto first = text.find(':');
  const auto second = text.find(':', first + 1);
  if (first == std::string::npos || second == std::string::npos) {
    throw std::invalid_argument(fmt::format("expected NAME:MIN:MAX, got \"{}\"", text));
  }
  return {text.substr(0, first), std::stod(text.substr(first + 1, second - first - 1)),
          std::stod(text.substr(second + 1))};
}

void print_fit(const device::GpuSpec& gpu) {
  fmt::print("| config | real ratio | emulator ratio | error (points) | Perseus T | N+P T | Perseus W | N+P W |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  for (const planner::OverlapTarget& target : planner::a100_llama_targets()) {
    const planner::OverlapRun run = planner::run_overlap_target(gpu, target);
    auto pct = [](double ours, double real) { return 100 * (ours / real - 1); };
    fmt::print(
        "| {} | {:.3f} | {:.3f} | {:+.1f} | {:.3f} s ({:+.1f}%) | {:.3f} s ({:+.1f}%) | {:.1f} ({:+.1f}%) | "
        "{:.1f} ({:+.1f}%) |\n",
        target.name(), target.ratio(), run.ratio(), 100 * (run.ratio() - target.ratio()), run.none_time_s,
        pct(run.none_time_s, target.perseus_time_s), run.nanobatch_time_s,
        pct(run.nanobatch_time_s, target.nanobatch_time_s), run.none_power_w,
        pct(run.none_power_w, target.perseus_power_w), run.nanobatch_power_w,
        pct(run.nanobatch_power_w, target.nanobatch_power_w));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string gpu_name = "a100-40gb";
    std::vector<planner::BoundedParameter> parameters;
    for (int index = 1; index < argc; ++index) {
      const std::string argument = argv[index];
      if (argument == "--gpu" && index + 1 < argc) {
        gpu_name = argv[++index];
      } else {
        parameters.push_back(parse_parameter(argument));
      }
    }
    const device::GpuSpec gpu = device::load_gpu(gpu_name);
    print_fit(gpu);
    if (parameters.empty()) parameters = planner::overlap_fit_parameters();
    const planner::OverlapFit all = planner::fit_overlap(gpu, planner::a100_llama_targets(), parameters);
    fmt::print("\nFit on all four: rms {:.2f} points;", all.rms_error_points);
    for (std::size_t index = 0; index < parameters.size(); ++index) {
      fmt::print(" {} = {:.4g}{}", parameters[index].name, all.values[index], all.at_bound[index] ? " (AT BOUND)" : "");
    }
    fmt::print("\n\n| held out | real ratio | predicted | error (points) | fit rms on the other three |");
    for (const planner::BoundedParameter& parameter : parameters) fmt::print(" {} |", parameter.name);
    fmt::print("\n|---|---|---|---|---|");
    for (std::size_t index = 0; index < parameters.size(); ++index) fmt::print("---|");
    fmt::print("\n");
    for (const planner::LeaveOneOutFold& fold :
         planner::leave_one_out(gpu, planner::a100_llama_targets(), parameters)) {
      fmt::print("| {} | {:.3f} | {:.3f} | {:+.1f} | {:.2f} |", fold.held_out.name(), fold.held_out.ratio(),
                 fold.predicted_ratio, fold.error_points(), fold.fit.rms_error_points);
      for (std::size_t index = 0; index < parameters.size(); ++index) {
        fmt::print(" {:.4g}{} |", fold.fit.values[index], fold.fit.at_bound[index] ? " (bound)" : "");
      }
      fmt::print("\n");
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "overlap_calibration_bench: %s\n", error.what());
    return 2;
  }
}
