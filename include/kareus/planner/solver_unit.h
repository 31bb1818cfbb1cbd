// kareus/planner/solver_unit.h - the time unit the pipeline solver quantizes at.
//
// Phillips-Dessouky plans only between quantized times, so options that share one are
// invisible to it: at a coarse unit a memory-bound profile's 20-30 clocks fall into 1-3 quanta
// and the frontier between them is left to the solver's greedy walks (bench/RESULTS.md, issue
// 28). The solver's unit is the one asked for, made finer where that happens, within a budget.
#pragma once

#include <cstddef>

#include "kareus/pipeline/pipeline_dag.h"

namespace kareus::planner {

inline constexpr int kMaxUnitHalvings = 4;         ///< at most 16x finer than asked
inline constexpr double kMaxRefinedUnits = 20000;  ///< units over the makespan range, refined
inline constexpr double kMaxRefinedWork = 2e6;     ///< operation-iterations, refined

/// All-slowest minus all-fastest makespan of `dag`, seconds.
[[nodiscard]] double makespan_range_s(const pipeline::PipelineDag& dag);

/// The solver's work bound: one iteration per unit over the range, each over every operation.
[[nodiscard]] double solve_work(double range_s, double unit_time_s, std::size_t operations);

/// config.unit_time_s halved (at most kMaxUnitHalvings times) while some instruction's options
/// fall into fewer quantized times than min(its distinct times, 8), as long as range_s stays
/// within kMaxRefinedUnits units and the solve of `operations` operations within
/// kMaxRefinedWork operation-iterations.
[[nodiscard]] double solver_unit_time_s(const pipeline::OneFOneBConfig& config, double range_s, std::size_t operations);

/// The (interleaved) 1F1B DAG of `config`; when refine_unit, at solver_unit_time_s, with
/// config.unit_time_s set to it.
[[nodiscard]] pipeline::PipelineDag build_solver_dag(pipeline::OneFOneBConfig& config, bool refine_unit);

}  // namespace kareus::planner
