// kareus/device/calibration.h - fit emulator preset parameters to measurements.
//
// `kareus calibrate` and scripts/device-check.sh feed it MeasurementRecords (measurement_log.h)
// made on real GPUs; it replays every record on the emulator (run_partition, noise-free) and
// adjusts a few GpuSpec parameters to minimize the mean squared log-ratio of predicted over
// measured time and energy (least squares on relative error, so a 1 ms GEMM counts as much as
// a 100 ms partition). The optimizer is Nelder-Mead over the log of each parameter, clamped to
// the preset schema's ranges, restarted from its best point until it stops improving:
// derivative-free, because the emulator's roofline and wave quantization have kinks. Fit errors
// are reported per kernel class (gemm, attention, memory_bound, collective, partition).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/device/gpu_spec.h"
#include "kareus/device/measurement_log.h"

namespace kareus::device {

/// The parameters fitted by default: GEMM, attention and HBM efficiencies, the per-CTA copy
/// rate and link efficiency of collectives, and the dynamic SM and HBM power.
[[nodiscard]] std::vector<std::string> default_calibration_parameters();

struct CalibrationOptions {
  std::vector<std::string> parameters = default_calibration_parameters();
  int max_evaluations = 6000;  ///< objective evaluations over all restarts
  double tolerance = 1e-10;    ///< stop a restart when the simplex's objective spread falls below
};

/// Relative fit error of one kernel class: root mean square of (predicted / measured - 1).
struct ClassError {
  std::string kernel_class;
  std::size_t count = 0;
  double time_rms = 0;
  double energy_rms = 0;
};

struct FittedParameter {
  std::string name;
  double initial = 0;
  double fitted = 0;
  /// The fit ended on the schema's lower or upper limit (`bound`): the model could not explain
  /// the records inside the range, so the value is a symptom, not a measurement.
  bool at_bound = false;
  double bound = 0;
};

struct CalibrationResult {
  GpuSpec gpu;  ///< the starting preset with the fitted parameters
  std::vector<FittedParameter> parameters;
  std::vector<ClassError> errors_before;  ///< of the starting preset
  std::vector<ClassError> errors_after;
  double objective_before = 0;
  double objective_after = 0;
  int evaluations = 0;
};

/// Which records calibrate() fits and which it only checks.
enum class Holdout {
  kPartition,  ///< fit the kernel records, hold out the whole-partition records (the default)
  kNone,       ///< fit everything
};

/// Parses "partition" / "none"; throws InputError naming --holdout.
[[nodiscard]] Holdout parse_holdout(std::string_view text);

struct CalibrationSplit {
  std::vector<MeasurementRecord> fit;
  std::vector<MeasurementRecord> held_out;
};

/// Splits `records` (order kept in each part) by `holdout`. Throws InputError when nothing is
/// left to fit.
[[nodiscard]] CalibrationSplit split_for_calibration(std::vector<MeasurementRecord> records, Holdout holdout);

/// Per-class errors of `gpu` on `records` (classes in order of first appearance).
[[nodiscard]] std::vector<ClassError> fit_errors(const GpuSpec& gpu, const std::vector<MeasurementRecord>& records);

/// Fits `options.parameters` of `start` to the stable records of `records` (a window whose clock
/// did not hold is not evidence about the model). Throws InputError when there are no
/// records, a parameter name is unknown, or a record's config does not fit its partition.
[[nodiscard]] CalibrationResult calibrate(const GpuSpec& start, const std::vector<MeasurementRecord>& records,
                                          const CalibrationOptions& options = {});

/// The JSON text of a preset by name (built-in) or path (ending in ".json"); InputError otherwise.
[[nodiscard]] std::string gpu_preset_text(std::string_view name_or_path);

/// `preset_json` (a data/gpus/*.json document) with each fitted parameter's value replaced and
/// its source set to `source`, e.g. "[F] kareus calibrate on a.jsonl, b.jsonl". Pretty-printed.
[[nodiscard]] std::string write_calibrated_preset(std::string_view preset_json, const CalibrationResult& result,
                                                  std::string_view source);

}  // namespace kareus::device
