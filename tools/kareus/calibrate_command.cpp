// kareus calibrate: fit emulator preset parameters to measurements (device/calibration.h).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <filesystem>

#include "commands.h"
#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/device/calibration.h"

namespace kareus::cli {
namespace {

struct CalibrateOptions {
  std::vector<std::string> measurements;
  std::string gpu = "a100-40gb";
  std::string out;
  std::string holdout = "partition";
  std::vector<std::string> parameters;
};

void print_errors(const char* title, const std::vector<device::ClassError>& errors) {
  fmt::print("{}\n  {:<14} {:>6} {:>10} {:>12}\n", title, "class", "count", "time rms", "energy rms");
  for (const device::ClassError& error : errors) {
    fmt::print("  {:<14} {:>6} {:>9.2f}% {:>11.2f}%\n", error.kernel_class, error.count, 100 * error.time_rms,
               100 * error.energy_rms);
  }
}

void run_calibrate(const CalibrateOptions& options) {
  const device::Holdout holdout = device::parse_holdout(options.holdout);
  check_writable_file(options.out, "--out");
  const std::string preset = device::gpu_preset_text(options.gpu);
  const device::GpuSpec start = device::parse_gpu(preset, options.gpu);
  std::vector<device::MeasurementRecord> records;
  for (const std::string& file : options.measurements) {
    for (device::MeasurementRecord& record : device::read_measurements(
             file, [](const std::string& message) { fmt::print(stderr, "kareus calibrate: warning: {}\n", message); }))
      records.push_back(std::move(record));
  }
  const auto [fit, held_out] = device::split_for_calibration(std::move(records), holdout);
  device::CalibrationOptions calibration;
  if (!options.parameters.empty()) calibration.parameters = options.parameters;
  const device::CalibrationResult result = device::calibrate(start, fit, calibration);
  std::vector<std::string> names;
  for (const std::string& file : options.measurements) names.push_back(std::filesystem::path(file).filename().string());
  const std::string source = fmt::format("[F] kareus calibrate on {}", fmt::join(names, ", "));
  write_file_atomic(options.out, device::write_calibrated_preset(preset, result, source));

  fmt::print("fitted {} parameters of {} to {} records ({} evaluations), mean squared log error {:.3g} -> {:.3g}\n",
             result.parameters.size(), start.name, fit.size(), result.evaluations, result.objective_before,
             result.objective_after);
  for (const device::FittedParameter& parameter : result.parameters) {
    const std::string bound =
        parameter.at_bound
            ? fmt::format("  at its limit {:g}: the model does not fit these records there", parameter.bound)
            : "";
    fmt::print("  {:<32} {:>12.6g} -> {:<12.6g}{}\n", parameter.name, parameter.initial, parameter.fitted, bound);
  }
  print_errors("fit error before:", result.errors_before);
  print_errors("fit error after:", result.errors_after);
  if (!held_out.empty()) {
    print_errors("held-out error before:", device::fit_errors(start, held_out));
    print_errors("held-out error after:", device::fit_errors(result.gpu, held_out));
  }
  fmt::print("wrote {}\n", options.out);
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto options = std::make_shared<CalibrateOptions>();
  CLI::App* command = app.add_subcommand("calibrate", "fit emulator preset parameters to measured JSONL records");
  command->add_option("--measurements", options->measurements, "JSONL files from kareus profile")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--gpu", options->gpu, "preset to start from (name or .json)")->capture_default_str();
  command->add_option("--out", options->out, "preset .json to write")->required();
  command->add_option("--holdout", options->holdout, "partition (fit kernels, check partitions) or none")
      ->capture_default_str();
  command->add_option("--parameters", options->parameters, "parameters to fit (default: efficiencies, rates, power)")
      ->delimiter(',');
  command->callback([options] { run_calibrate(*options); });
}

}  // namespace kareus::cli
