// The emulator's overlap gain against the A100 runs (planner/overlap_calibration.h): the four
// ratios T(N+P fastest) / T(Perseus fastest) and iteration fits of a preset, then leave-one-out
// of the overlap fit (leave one configuration out; leave one model out), and what the preset
// predicts for the four unseen Qwen3 configurations. Prints markdown tables for bench/RESULTS.md.
// Usage: overlap_calibration_bench [--gpu NAME|FILE] [--table] [--both-ends] [NAME:MIN:MAX ...]
// (--both-ends: fit the slowest ends' ratios, at 900 MHz, beside the fastest ends')
// (the parameters to fit, each with its range; default: planner::overlap_fit_parameters()).
#include <array>
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

auto pct(double ours, double real) { return 100 * (ours / real - 1); }

void print_fit(const device::GpuSpec& gpu) {
  fmt::print(
      "| config | real ratio | emulator ratio | error (points) | Perseus T | N+P T | Perseus W | N+P W | real slowest "
      "ratio | emulator at {} MHz | error (points) |\n",
      planner::kSlowestClockMhz);
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const planner::OverlapTarget& target : planner::a100_targets()) {
    const planner::OverlapRun run = planner::run_overlap_target(gpu, target);
    const planner::OverlapRun slow = planner::run_overlap_target_at(gpu, target, planner::kSlowestClockMhz);
    fmt::print(
        "| {} | {:.3f} | {:.3f} | {:+.1f} | {:.3f} s ({:+.1f}%) | {:.3f} s ({:+.1f}%) | {:.1f} ({:+.1f}%) | "
        "{:.1f} ({:+.1f}%) | ",
        target.name(), target.ratio(), run.ratio(), 100 * (run.ratio() - target.ratio()), run.none_time_s,
        pct(run.none_time_s, target.perseus_time_s), run.nanobatch_time_s,
        pct(run.nanobatch_time_s, target.nanobatch_time_s), run.none_power_w,
        pct(run.none_power_w, target.perseus_power_w), run.nanobatch_power_w,
        pct(run.nanobatch_power_w, target.nanobatch_power_w));
    if (target.has_slowest()) {
      fmt::print("{:.3f} | {:.3f} | {:+.1f} |\n", target.slowest_ratio(), slow.ratio(),
                 100 * (slow.ratio() - target.slowest_ratio()));
    } else {
      fmt::print("- | {:.3f} | - |\n", slow.ratio());
    }
  }
}

/// The four Qwen3 1.7B configurations of the artifact no fit saw (docs/kareus.md section 7).
void print_unseen(const device::GpuSpec& gpu) {
  fmt::print(
      "\n| unseen config | emulator ratio | Perseus T | N+P T | Perseus W | N+P W |\n|---|---|---|---|---|---|\n");
  for (const auto& [cp, tp, mbs, seq] :
       {std::array{2, 4, 8, 8192}, std::array{2, 4, 16, 4096}, std::array{1, 8, 8, 8192}, std::array{1, 8, 16, 4096}}) {
    const planner::OverlapTarget target{"qwen3-1.7b", cp, tp, mbs, seq};
    const planner::OverlapRun run = planner::run_overlap_target(gpu, target);
    fmt::print("| {} | {:.3f} | {:.3f} s | {:.3f} s | {:.1f} | {:.1f} |\n", target.name(), run.ratio(), run.none_time_s,
               run.nanobatch_time_s, run.none_power_w, run.nanobatch_power_w);
  }
}

void print_folds(const std::string& title, const std::vector<planner::LeaveOneOutFold>& folds,
                 const std::vector<planner::BoundedParameter>& parameters) {
  fmt::print("\n| {} | real ratio | predicted | error (points) | slowest: error (points) | fit rms |", title);
  for (const planner::BoundedParameter& parameter : parameters) fmt::print(" {} |", parameter.name);
  fmt::print("\n|---|---|---|---|---|---|");
  for (std::size_t index = 0; index < parameters.size(); ++index) fmt::print("---|");
  fmt::print("\n");
  for (const planner::LeaveOneOutFold& fold : folds) {
    fmt::print("| {} | {:.3f} | {:.3f} | {:+.1f} | {} | {:.2f} |", fold.held_out.name(), fold.held_out.ratio(),
               fold.predicted_ratio, fold.error_points(),
               fold.held_out.has_slowest() ? fmt::format("{:+.1f}", fold.slowest_error_points()) : "-",
               fold.fit.rms_error_points);
    for (std::size_t index = 0; index < parameters.size(); ++index) {
      fmt::print(" {:.4g}{} |", fold.fit.values[index], fold.fit.at_bound[index] ? " (bound)" : "");
    }
    fmt::print("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string gpu_name = "a100-40gb";
    bool table_only = false;
    planner::FitEnds ends = planner::FitEnds::kFastest;
    std::vector<planner::BoundedParameter> parameters;
    for (int index = 1; index < argc; ++index) {
      const std::string argument = argv[index];
      if (argument == "--table") {
        table_only = true;
      } else if (argument == "--both-ends") {
        ends = planner::FitEnds::kBoth;
      } else if (argument == "--gpu" && index + 1 < argc) {
        gpu_name = argv[++index];
      } else {
        parameters.push_back(parse_parameter(argument));
      }
    }
    const device::GpuSpec gpu = device::load_gpu(gpu_name);
    print_fit(gpu);
    print_unseen(gpu);
    if (table_only) return 0;
    if (parameters.empty()) parameters = planner::overlap_fit_parameters();
    const std::vector<planner::OverlapTarget>& targets = planner::a100_targets();
    const planner::OverlapFit all = planner::fit_overlap(gpu, targets, parameters, ends);
    fmt::print("\nFit on all six: rms {:.2f} points;", all.rms_error_points);
    for (std::size_t index = 0; index < parameters.size(); ++index) {
      fmt::print(" {} = {:.4g}{}", parameters[index].name, all.values[index], all.at_bound[index] ? " (AT BOUND)" : "");
    }
    fmt::print("\n");
    print_folds("left out (one config)", planner::leave_one_out(gpu, targets, parameters, ends), parameters);
    // Leave one model out: fit on Llama, predict both Qwen; fit on Llama and one Qwen, predict the other.
    const std::vector<planner::OverlapTarget> llama = planner::targets_of(targets, "llama3.2-3b");
    const std::vector<planner::OverlapTarget> qwen = planner::targets_of(targets, "qwen3-1.7b");
    std::vector<planner::LeaveOneOutFold> by_model = planner::fit_and_predict(gpu, llama, qwen, parameters, ends);
    for (std::size_t held = 0; held < qwen.size(); ++held) {
      std::vector<planner::OverlapTarget> fitted = llama;
      fitted.push_back(qwen[1 - held]);
      by_model.push_back(planner::fit_and_predict(gpu, fitted, {qwen[held]}, parameters, ends).front());
    }
    print_folds("predicted (rows 1-2 fitted on Llama's four; rows 3-4 on those and the other Qwen3)", by_model,
                parameters);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "overlap_calibration_bench: %s\n", error.what());
    return 2;
  }
}
