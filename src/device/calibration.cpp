#include "kareus/device/calibration.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/embedded_data.h"
#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/nelder_mead.h"
#include "kareus/device/emulator.h"

namespace kareus::device {
namespace {

struct Prediction {
  double time_s = 0;
  double energy_j = 0;
};

Prediction predict(const GpuSpec& gpu, const MeasurementRecord& record) {
  const PartitionRun run = run_partition(gpu, record.partition, record.config);
  return {run.time_s, run.energy_j};
}

double squared_log_error(const GpuSpec& gpu, const std::vector<const MeasurementRecord*>& records) {
  double sum = 0;
  for (const MeasurementRecord* record : records) {
    const Prediction prediction = predict(gpu, *record);
    const double time = std::log(prediction.time_s / record->time_s);
    const double energy = std::log(prediction.energy_j / record->energy_j);
    sum += time * time + energy * energy;
  }
  const double value = sum / static_cast<double>(2 * records.size());
  return std::isfinite(value) ? value : std::numeric_limits<double>::max();
}

}  // namespace

std::vector<std::string> default_calibration_parameters() {
  return {"gemm_efficiency",
          "gemm_small_k_half",
          "attention_forward_efficiency",
          "attention_backward_efficiency",
          "hbm_efficiency",
          "cta_bytes_per_clock",
          "link_efficiency",
          "sm_dynamic_power_w",
          "hbm_power_w_per_tbps"};
}

std::vector<ClassError> fit_errors(const GpuSpec& gpu, const std::vector<MeasurementRecord>& records) {
  std::vector<ClassError> errors;
  for (const MeasurementRecord& record : records) {
    const std::string kernel_class = record.kernel_class();
    auto found =
        std::find_if(errors.begin(), errors.end(), [&](const ClassError& e) { return e.kernel_class == kernel_class; });
    if (found == errors.end()) found = errors.insert(errors.end(), ClassError{kernel_class, 0, 0, 0});
    const Prediction prediction = predict(gpu, record);
    const double time = prediction.time_s / record.time_s - 1;
    const double energy = prediction.energy_j / record.energy_j - 1;
    found->count += 1;
    found->time_rms += time * time;  // sums of squares until the end
    found->energy_rms += energy * energy;
  }
  for (ClassError& error : errors) {
    error.time_rms = std::sqrt(error.time_rms / static_cast<double>(error.count));
    error.energy_rms = std::sqrt(error.energy_rms / static_cast<double>(error.count));
  }
  return errors;
}

CalibrationResult calibrate(const GpuSpec& start, const std::vector<MeasurementRecord>& records,
                            const CalibrationOptions& options) {
  std::vector<const MeasurementRecord*> usable;
  std::vector<MeasurementRecord> stable;
  for (const MeasurementRecord& record : records) {
    if (!record.details.stable) continue;
    try {
      validate_config(start, record.partition, record.config);
    } catch (const InputError& error) {
      if (record.origin.empty()) throw;
      throw InputError(fmt::format("{}: {}", record.origin, error.what()));
    }
    // A record whose error term is not finite would turn every objective into infinity.
    const Prediction prediction = predict(start, record);
    if (!std::isfinite(std::log(prediction.time_s / record.time_s)) ||
        !std::isfinite(std::log(prediction.energy_j / record.energy_j))) {
      throw InputError(fmt::format("{}measured {} s, {} J against a prediction of {} s, {} J: not a finite error",
                                   record.origin.empty() ? "" : record.origin + ": ", record.time_s, record.energy_j,
                                   prediction.time_s, prediction.energy_j));
    }
    usable.push_back(&record);
    stable.push_back(record);
  }
  if (usable.empty()) {
    throw InputError(
        fmt::format("no stable measurements to calibrate on ({} records, all with a clock that did not "
                    "hold)",
                    records.size()));
  }
  if (options.parameters.empty()) throw InputError("no parameters to calibrate");
  CalibrationResult result;
  result.gpu = start;
  std::vector<ParameterRef> refs;
  std::vector<double> point;
  for (const std::string& name : options.parameters) {
    const std::optional<ParameterRef> ref = find_parameter(result.gpu, name);
    if (!ref) throw InputError(fmt::format("'{}' is not a floating-point parameter of a GPU preset", name));
    if (*ref->value <= 0)
      throw InputError(fmt::format("parameter {} starts at {}: it must be positive to fit", name, *ref->value));
    refs.push_back(*ref);
    refs.back().min = std::max(ref->min, 1e-9);  // the fit runs in log space: a positive floor
    point.push_back(std::log(*ref->value));
    result.parameters.push_back({name, *ref->value, *ref->value, false, 0});
  }
  auto apply = [&](const std::vector<double>& log_values) {
    for (std::size_t index = 0; index < refs.size(); ++index) {
      *refs[index].value = std::clamp(std::exp(log_values[index]), refs[index].min, refs[index].max);
    }
  };
  auto objective = [&](const std::vector<double>& log_values) {
    apply(log_values);
    return squared_log_error(result.gpu, usable);
  };
  result.objective_before = objective(point);
  result.errors_before = fit_errors(start, stable);
  double best = result.objective_before;
  // Restarts from the best point with a smaller simplex each time, until one stops helping.
  double step = 0.3;
  while (result.evaluations < options.max_evaluations) {
    const std::vector<double> next =
        nelder_mead(objective, point, step, options.max_evaluations, options.tolerance, result.evaluations);
    const double value = objective(next);
    ++result.evaluations;
    const bool improved = value < best * (1 - 1e-6);
    if (value < best) best = value, point = next;
    if (!improved && step < 0.05) break;
    step = std::max(step * 0.5, 0.01);
  }
  apply(point);
  result.objective_after = best;
  for (std::size_t index = 0; index < refs.size(); ++index) {
    FittedParameter& parameter = result.parameters[index];
    parameter.fitted = *refs[index].value;
    for (const double limit : {refs[index].min, refs[index].max}) {
      if (std::abs(parameter.fitted - limit) <= 1e-9 * std::max(1.0, std::abs(limit))) {
        parameter.at_bound = true;
        parameter.bound = limit;
      }
    }
  }
  result.errors_after = fit_errors(result.gpu, stable);
  return result;
}

std::string gpu_preset_text(std::string_view name_or_path) {
  if (name_or_path.ends_with(".json")) return read_text_file(std::string(name_or_path));
  if (auto content = find_embedded_file(fmt::format("gpus/{}.json", name_or_path))) return std::string(*content);
  (void)load_gpu(name_or_path);  // throws the InputError naming --gpu and the presets
  throw InputError(fmt::format("--gpu {}: unknown GPU", name_or_path));
}

std::string write_calibrated_preset(std::string_view preset_json, const CalibrationResult& result,
                                    std::string_view source) {
  nlohmann::json document = parse_json(preset_json, "preset");
  for (const FittedParameter& parameter : result.parameters) {
    nlohmann::json& entry = document.at("parameters").at(parameter.name);
    entry["value"] = parameter.fitted;
    entry["source"] = std::string(source);
  }
  return document.dump(2) + "\n";
}

Holdout parse_holdout(std::string_view text) {
  if (text == "partition") return Holdout::kPartition;
  if (text == "none") return Holdout::kNone;
  throw InputError(fmt::format("--holdout {}: expected partition or none", text));
}

CalibrationSplit split_for_calibration(std::vector<MeasurementRecord> records, Holdout holdout) {
  CalibrationSplit split;
  for (MeasurementRecord& record : records) {
    const bool hold = holdout == Holdout::kPartition && record.kernel_class() == "partition";
    (hold ? split.held_out : split.fit).push_back(std::move(record));
  }
  if (split.fit.empty()) {
    throw InputError(
        "--measurements: no records to fit (with --holdout partition, partition records are only "
        "checked: add kernel records from `kareus profile --kernels`)");
  }
  return split;
}

}  // namespace kareus::device
