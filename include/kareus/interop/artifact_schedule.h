// kareus/interop/artifact_schedule.h - the Kareus artifact's schedule files, to and from plans.
//
// Sits after plan/ in the data flow: a kareus.plan/1 plan becomes the pair of files the artifact's
// patched Megatron and Zeus's PointSolution3D read (docs/kareus.md section 10), and such files
// (made by kareus or by the artifact's own solver) become plans again, so `kareus simulate` can
// judge them. One pair per frontier point, NNNNN = the point's number, zero-padded to 5 digits:
//   freqs_pipeline_NNNNN.py   [[('forward'|'backward', MHz), ...] per stage, in 1F1B order]
//   scheds_pipeline_NNNNN.py  the same shape with comm config strings
//                             "<start slot>-none-<CTAs>-1024" instead of the clock.
// Units: MHz, CTAs; the trailing comment lines carry the plan's predicted time (s) and energy (J).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kareus/plan/plan.h"
#include "kareus/workload/workload.h"

namespace kareus::interop {

/// The order of the partition keys in one scheds entry (the artifact's parser's order): a
/// forward entry lists `forward_keys`; a backward entry lists `recompute_keys` (the recompute
/// forward's configs, empty without full recompute) then `backward_keys`.
/// CP 1: forward (fwd_attn, fwd_mlp), backward (fwd_attn, fwd_mlp, bwd_attn, bwd_mlp).
/// CP > 1: forward (fwd_qkv_ar, fwd_qkv_ag, fwd_ao_ag, fwd_ao_ar, fwd_mlp), backward the same
/// five then (bwd_qkv_ar, bwd_qkv_rs, bwd_a_rs, bwd_a_ag, bwd_o_ag, bwd_o_ar, bwd_mlp).
/// Without full recompute the artifact's file is one ((forward, ...), (backward, ...)) pair per
/// microbatch, in microbatch order, instead of one entry per instruction.
struct ArtifactKeyLayout {
  std::vector<std::string> forward_keys;
  std::vector<std::string> recompute_keys;
  std::vector<std::string> backward_keys;
  bool per_instruction = true;  ///< full recompute: one entry per instruction, in 1F1B order
};

/// The layout for `workload`. Throws InputError when the workload's searchable partition keys
/// are not the artifact's (the file format could not name them).
[[nodiscard]] ArtifactKeyLayout artifact_key_layout(const workload::Workload& workload);

/// The two files' text. `scheds_py` is empty for a plan without comm configs (no overlap: the
/// artifact then runs without a schedule file, i.e. NCCL with no SM bound).
struct ArtifactFiles {
  std::string freqs_py;
  std::string scheds_py;
};

/// Renders `plan` (made for `workload`). `number` appears in the comment lines. Throws
/// InputError naming `origin` and the stage/instruction when the plan does not fit the workload
/// or cannot be expressed (some instructions overlapped and others not; a key set that differs
/// from the layout; a slot or CTA count the config string cannot carry).
[[nodiscard]] ArtifactFiles export_artifact(const plan::Plan& plan, const workload::Workload& workload, int number,
                                            std::string_view origin);

/// Parses the files' text back into a plan for `workload` on the GPU `gpu_name` (the files name
/// neither; workload_json = plan::plan_workload_json).
/// `scheds_py` = nullopt: no comm configs. Predicted time and energy come from kareus's comment
/// lines ("# Iteration N predicted time_s: T", "... energy_j: E"), 0 when absent. Throws
/// InputError naming the file (`freqs_origin`, `scheds_origin`), line and entry on any
/// malformed, out-of-range or mismatched entry.
[[nodiscard]] plan::Plan import_artifact(std::string_view freqs_py, std::string_view freqs_origin,
                                         const std::optional<std::string>& scheds_py, std::string_view scheds_origin,
                                         const workload::Workload& workload, std::string_view gpu_name = "");

/// "freqs_pipeline_00007.py" / "scheds_pipeline_00007.py". Requires 0 <= number <= 99999.
[[nodiscard]] std::string freqs_file_name(int number);
[[nodiscard]] std::string scheds_file_name(int number);

/// What `kareus export --format artifact` does: writes the file pair of every plan to `out_dir`
/// (each to a temporary beside it, then renamed: common/file_io.h). `plans[i]` gets number
/// `numbers[i]`. Returns the paths written.
struct ExportedPlan {
  std::filesystem::path plan;
  int number = 0;
};
std::vector<std::filesystem::path> export_artifact_files(const std::vector<ExportedPlan>& plans,
                                                         const workload::Workload& workload,
                                                         const std::filesystem::path& out_dir);

/// The plans of a folder for export: DIR/plan_NN.json (numbered by NN) or every *.json plan in it
/// (numbered in name order). Throws InputError when there is none.
[[nodiscard]] std::vector<ExportedPlan> plans_in_directory(const std::filesystem::path& dir);

/// What `kareus import --format artifact` does: every freqs_pipeline_NNNNN.py of `in_dir` (with
/// its scheds file when present) becomes OUT/plan_NNNNN.json; when every plan carries predicted
/// figures, OUT/frontier.json (kareus.frontier/1, Pareto points by time) is written last, so
/// `kareus serve --frontier OUT` can serve them. Returns the plan paths written.
std::vector<std::filesystem::path> import_artifact_files(const std::filesystem::path& in_dir,
                                                         const workload::Workload& workload, std::string_view gpu_name,
                                                         const std::filesystem::path& out_dir);

}  // namespace kareus::interop
