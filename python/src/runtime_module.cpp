// kareus._runtime: the C++ runtime (runtime.h) for Python training loops.
//
// A thin pybind11 layer: kareus::InputError becomes kareus.InputError (a ValueError) and
// kareus::Error becomes kareus.KareusError (a RuntimeError); calls that wait release the GIL.
// The user-facing class is kareus.PipelineFrequencyOptimizer (python/kareus/__init__.py).
// Workload exposes the C++ partition builder (partition.h) so kareus.torch executes the very
// partitions, keys and launch slots the search planned for; Python never re-derives them.
// The plan contract is bound the same way: read_plan, check_plan_workload, the comm-config
// rules (check_plan_comm_configs, Workload.comm_configs: partition/comm_fit.h), one_f_one_b,
// map_rank / global_rank / parallel_groups are the C++ ones, so no Python copy of them exists.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <pybind11/operators.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "kareus/common/error.h"
#include "kareus/device/gpu_spec.h"
#include "kareus/partition/comm_fit.h"
#include "kareus/partition/partition.h"
#include "kareus/pipeline/schedule.h"
#include "kareus/plan/plan.h"
#include "kareus/plan/plan_fit.h"
#include "kareus/runtime/deadline.h"
#include "kareus/runtime/rank_mapping.h"
#include "kareus/runtime/runtime.h"
#include "kareus/workload/model.h"
#include "kareus/workload/op_graph.h"
#include "kareus/workload/workload.h"

namespace py = pybind11;
using namespace kareus::runtime;

namespace {

namespace wl = kareus::workload;
namespace plan = kareus::plan;
namespace pipeline = kareus::pipeline;
using kareus::to_string;
namespace part = kareus::partition;

// The model as the plan's shape records it (workload/model.h, one writer of its fields), plus its name.
py::dict model_dict(const wl::ModelSpec& model) {
  py::dict result = py::module_::import("json").attr("loads")(wl::model_shape_json(model));
  result["name"] = model.name;
  return result;
}

py::dict op_dict(const wl::Op& op, int layer) {
  py::dict result;
  result["name"] = op.name;
  result["kind"] = std::string(wl::to_string(op.kind));
  result["layer"] = layer;
  return result;
}

/// Every partition of one instruction of `stage`, as dicts, in execution order. Adds what the
/// executor needs beyond partition.h: the layer of each compute op (partitions span a layer
/// boundary) and the layer and nanobatch of the collective (the NB0 partition runs NB1's
/// collective of the previous segment).
py::list partitions_of(const wl::Workload& workload, int stage, kareus::Direction direction) {
  if (stage < 0 || stage >= workload.parallel.pp) {
    throw kareus::InputError("stage " + std::to_string(stage) + " is outside 0.." +
                             std::to_string(workload.parallel.pp - 1));
  }
  const wl::LayerGraph graph = wl::build_layer_graph(workload);
  const auto& layer_ops = direction == kareus::Direction::kForward ? graph.forward : graph.backward;
  const auto compute_per_layer =
      std::count_if(layer_ops.begin(), layer_ops.end(), [](const wl::Op& op) { return !op.is_collective(); });
  const int layers = workload.stage_layers[static_cast<std::size_t>(stage)];
  auto layer_of = [&](std::size_t flat_index) {
    const int step = static_cast<int>(flat_index / static_cast<std::size_t>(compute_per_layer));
    return direction == kareus::Direction::kForward ? step : layers - 1 - step;
  };

  py::list result;
  std::size_t flat_index = 0;  // index of the segment's first op in the stage's flattened compute ops
  int previous_layer = 0;      // layer of the previous partition (its collective is NB0's pending one)
  for (const part::Partition& partition : part::build_partitions(workload, stage, direction)) {
    py::dict entry;
    entry["key"] = partition.key;
    entry["direction"] = std::string(kareus::to_string(direction));
    entry["layer"] = partition.layer;
    entry["nanobatch"] = partition.nanobatch;
    entry["searchable"] = partition.searchable();
    py::list ops;
    for (std::size_t index = 0; index < partition.compute_ops.size(); ++index) {
      ops.append(op_dict(partition.compute_ops[index], layer_of(flat_index + index)));
    }
    entry["ops"] = ops;
    py::list slots;
    for (const part::Slot& slot : partition.slots) {
      py::dict slot_entry;
      slot_entry["name"] = slot.name;
      slot_entry["first_op"] = slot.first_op;
      slots.append(slot_entry);
    }
    entry["slots"] = slots;
    if (partition.collective) {
      const wl::Collective& collective = *partition.collective->collective;
      py::dict comm;
      comm["name"] = partition.collective->name;
      comm["kind"] = std::string(wl::to_string(collective.kind));
      comm["group"] = std::string(wl::to_string(collective.group));
      comm["group_size"] = collective.group_size;
      comm["bytes"] = collective.bytes;
      comm["nanobatch"] = 1 - partition.nanobatch;
      comm["layer"] = partition.nanobatch == 0 ? previous_layer : partition.layer;
      entry["collective"] = comm;
    } else {
      entry["collective"] = py::none();
    }
    result.append(entry);
    if (partition.nanobatch == 1) flat_index += partition.compute_ops.size();
    previous_layer = partition.layer;
  }
  return result;
}

/// kareus::InputError -> kareus.InputError (a ValueError), kareus::Error -> kareus.KareusError.
void bind_errors(py::module_& module) {
  static py::exception<kareus::Error> error_type(module, "KareusError", PyExc_RuntimeError);
  static py::exception<kareus::InputError> input_error_type(module, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const kareus::InputError& error) {
      // PyErr_SetString, not the call operator: pybind11 3 deprecates that, and set_error is
      // not in Debian's 2.10.
      PyErr_SetString(input_error_type.ptr(), error.what());
    } catch (const kareus::Error& error) {
      PyErr_SetString(error_type.ptr(), error.what());
    }
  });
}

/// Megatron's rank order (rank_mapping.h) and the process groups it implies.
void bind_rank_mapping(py::module_& module) {
  module.def(
      "map_rank",
      [](int rank, int tp, int cp, int pp, int dp) {
        const RankCoordinates coordinates = map_rank(rank, {tp, cp, pp, dp});
        py::dict result;
        result["tp_rank"] = coordinates.tp_rank;
        result["cp_rank"] = coordinates.cp_rank;
        result["dp_rank"] = coordinates.dp_rank;
        result["stage"] = coordinates.stage;
        return result;
      },
      py::arg("rank"), py::arg("tp") = 1, py::arg("cp") = 1, py::arg("pp") = 1, py::arg("dp") = 1,
      "Megatron's tp-cp-dp-pp rank order: a dict of tp_rank, cp_rank, dp_rank, stage.");

  module.def(
      "global_rank",
      [](int tp_rank, int cp_rank, int dp_rank, int stage, int tp, int cp, int pp, int dp) {
        return global_rank({tp_rank, cp_rank, dp_rank, stage}, {tp, cp, pp, dp});
      },
      py::arg("tp_rank") = 0, py::arg("cp_rank") = 0, py::arg("dp_rank") = 0, py::arg("stage") = 0, py::kw_only(),
      py::arg("tp") = 1, py::arg("cp") = 1, py::arg("pp") = 1, py::arg("dp") = 1,
      "The global rank at these coordinates (the inverse of map_rank).");
  module.def(
      "parallel_groups",
      [](const std::string& kind, int tp, int cp, int pp, int dp) {
        return parallel_groups(parse_parallel_group(kind, "parallel_groups"), {tp, cp, pp, dp});
      },
      py::arg("kind"), py::kw_only(), py::arg("tp") = 1, py::arg("cp") = 1, py::arg("pp") = 1, py::arg("dp") = 1,
      "Every process group of `kind`: \"tp\", \"cp\", \"gradient\" (DP x CP) or \"embedding\" (first and last "
      "stage), each a list of global ranks ascending, in the order every rank must create them.");
}

/// The plan contract (plan.h), in three parts: comm configs, plans with their workload check,
/// the 1F1B order. The comm config of a partition key (launch slot, CTA count), as plans and the runtime hold it.
void bind_comm_config(py::module_& module) {
  module.attr("SLOT_NONE") = std::string(part::kSlotNone);
  py::class_<part::CommConfig>(module, "CommConfig",
                               "The collective knobs of one partition key: launch slot and CTA count (0: NCCL's "
                               "own choice, not overlapped).")
      .def(py::init([](std::string slot, int ctas) {
             return part::CommConfig{std::move(slot), ctas};
           }),
           py::arg("slot"), py::arg("ctas"))
      .def_readonly("slot", &part::CommConfig::slot)
      .def_readonly("ctas", &part::CommConfig::ctas)
      .def_property_readonly("overlapped", [](const part::CommConfig& config) { return config.ctas > 0; })
      .def(py::self == py::self)
      .def("__hash__",
           [](const part::CommConfig& config) { return py::hash(py::make_tuple(config.slot, config.ctas)); })
      .def("__repr__", [](const part::CommConfig& config) {
        return "CommConfig(slot='" + config.slot + "', ctas=" + std::to_string(config.ctas) + ")";
      });
}

/// A parsed plan (read_plan), its workload check and the workload it was made for.
void bind_plan(py::module_& module) {
  py::class_<plan::PlannedInstruction>(module, "PlannedInstruction", "One instruction of a stage of a plan.")
      .def_property_readonly("type", [](const plan::PlannedInstruction& i) { return std::string(to_string(i.type)); })
      .def_readonly("microbatch", &plan::PlannedInstruction::microbatch)
      .def_readonly("chunk", &plan::PlannedInstruction::chunk)
      .def_readonly("freq_mhz", &plan::PlannedInstruction::freq_mhz)
      .def_property_readonly(
          "overlap",
          [](const plan::PlannedInstruction& i) { return std::string(wl::to_string(plan::effective_overlap(i))); },
          "\"nanobatch\" or \"none\" (plan::effective_overlap)")
      .def_property_readonly("partitions", [](const plan::PlannedInstruction& i) {
        return std::map<std::string, part::CommConfig>(i.partitions.begin(), i.partitions.end());
      });

  py::class_<plan::Plan>(module, "Plan", "A parsed and validated kareus.plan/2 (or /1) plan (read_plan).")
      .def_property_readonly("stages",
                             [](const plan::Plan& plan) {
                               std::vector<std::vector<plan::PlannedInstruction>> stages;
                               for (const plan::StagePlan& stage : plan.stages) stages.push_back(stage.instructions);
                               return stages;
                             })
      .def_property_readonly("microbatches", [](const plan::Plan& plan) { return plan::microbatch_count(plan); })
      .def_readonly("workload_json", &plan::Plan::workload_json)
      .def_readonly("predicted_time_s", &plan::Plan::predicted_time_s)
      .def_readonly("predicted_energy_j", &plan::Plan::predicted_energy_j);

  module.def("read_plan", &plan::read_plan, py::arg("path"),
             "Reads and validates a plan file: schema, fields, stages in order, 1F1B order on every stage.");
  module.def(
      "check_plan_workload",
      [](const plan::Plan& plan, const wl::Workload& workload, const std::string& gpu, const std::string& origin) {
        plan::check_plan_workload(plan, plan::plan_workload_json(workload, gpu), origin);
      },
      py::arg("plan"), py::arg("workload"), py::arg("gpu") = "", py::arg("origin") = "plan",
      "Raises InputError \"ORIGIN: made for seq 32, this run has seq 31\" naming the first field of the model "
      "shape, parallel sizes, mbs, seq, microbatches, nanobatches, recompute, layer split or GPU name (when given) "
      "that differs.");
  module.attr("MAX_CTAS") = part::kMaxCtas;
  module.def(
      "check_plan_comm_configs",
      [](const plan::Plan& plan, const wl::Workload& workload, const std::string& origin, int max_ctas,
         int default_ctas) {
        plan::check_plan_comm_configs(plan, workload, {max_ctas, default_ctas}, origin);
      },
      py::arg("plan"), py::arg("workload"), py::arg("origin") = "plan", py::kw_only(),
      py::arg("max_ctas") = part::kMaxCtas, py::arg("default_ctas") = 0,
      "Raises InputError \"ORIGIN: stage S instruction I (forward microbatch M): ...\" when a nanobatched "
      "instruction's comm configs do not fit `workload` (partition/comm_fit.h): a key the instruction does not "
      "search (trails included) or a searchable key without a config, a slot that is not the key's (nor "
      "\"none\"), ctas outside 1..max_ctas (the GPU's SM count; MAX_CTAS without a GPU), or a default_ctas "
      "(the GPU's default_comm_ctas; 0: not checked) outside it.");
  module.def(
      "check_plan_fits",
      [](const plan::Plan& plan, const wl::Workload& workload, const std::string& origin, const std::string& gpu,
         int max_ctas, int default_ctas) {
        plan::PlanLimits limits{{max_ctas, default_ctas}, {}, "the GPU"};
        if (!gpu.empty()) {
          const kareus::device::GpuSpec spec = kareus::device::load_gpu(gpu);
          limits.clocks_mhz = spec.supported_clocks_mhz();
          limits.gpu = spec.name;
        }
        plan::check_plan_fits(plan, workload, limits, origin);
      },
      py::arg("plan"), py::arg("workload"), py::arg("origin") = "plan", py::kw_only(), py::arg("gpu") = "",
      py::arg("max_ctas") = part::kMaxCtas, py::arg("default_ctas") = 0,
      "The one plan check (plan/plan_fit.h): check_plan_comm_configs, and every clock a clock of the GPU preset "
      "`gpu` (not checked without one). Raises InputError \"ORIGIN: stage S instruction I (forward microbatch "
      "M): freq_mhz 1411 is not a clock of a100-40gb (210..1410 MHz in 15 MHz steps)\".");
  module.def(
      "plan_target",
      [](const plan::Plan& plan, const std::string& origin) {
        plan::PlanTarget target = plan::plan_target(plan, origin);
        return py::make_tuple(std::move(target.workload), target.gpu);
      },
      py::arg("plan"), py::arg("origin") = "plan",
      "(Workload, gpu name) the plan was made for; raises InputError when its block is incomplete.");
}

/// The 1F1B order every Python caller follows (no copy of it in Python).
void bind_pipeline_order(py::module_& module) {
  module.def(
      "one_f_one_b",
      [](int stage, int stages, int microbatches) {
        if (stages < 1 || stage < 0 || stage >= stages || microbatches < 1) {
          throw kareus::InputError("one_f_one_b: needs 0 <= stage < stages and microbatches >= 1, found stage " +
                                   std::to_string(stage) + ", stages " + std::to_string(stages) + ", microbatches " +
                                   std::to_string(microbatches));
        }
        std::vector<std::pair<std::string, int>> order;
        for (const pipeline::Instruction& instruction : pipeline::one_f_one_b(stage, stages, microbatches)) {
          order.emplace_back(std::string(to_string(instruction.type)), instruction.microbatch);
        }
        return order;
      },
      py::arg("stage"), py::arg("stages"), py::arg("microbatches"),
      "(type, microbatch) of one stage in synchronous 1F1B order (Megatron's non-interleaved schedule).");
  module.def(
      "interleaved_one_f_one_b",
      [](int stage, int stages, int chunks, int microbatches) {
        const bool shape_ok = stages >= 1 && stage >= 0 && stage < stages && chunks >= 1 && microbatches >= 1 &&
                              (chunks == 1 || (stages >= 2 && microbatches % stages == 0));
        if (!shape_ok) {
          throw kareus::InputError(
              "interleaved_one_f_one_b: needs 0 <= stage < stages, chunks >= 1, microbatches >= 1 and, with chunks "
              "> 1, stages >= 2 and microbatches a multiple of stages; found stage " +
              std::to_string(stage) + ", stages " + std::to_string(stages) + ", chunks " + std::to_string(chunks) +
              ", microbatches " + std::to_string(microbatches));
        }
        std::vector<std::tuple<std::string, int, int>> order;
        for (const pipeline::Instruction& instruction :
             pipeline::interleaved_one_f_one_b(stage, stages, chunks, microbatches)) {
          order.emplace_back(std::string(to_string(instruction.type)), instruction.chunk, instruction.microbatch);
        }
        return order;
      },
      py::arg("stage"), py::arg("stages"), py::arg("chunks"), py::arg("microbatches"),
      "(type, chunk, microbatch) of one stage in Megatron's interleaved 1F1B order (forward_backward_pipelining_"
      "with_interleaving at the default microbatch group size, `stages`); chunks 1 is one_f_one_b.");
}

/// Model and GPU presets, and the deadline choice over a frontier.
void bind_presets(py::module_& module) {
  module.def(
      "choose_for_deadline",
      [](const std::vector<std::tuple<double, double, std::string>>& points, double deadline_s) {
        std::vector<FrontierPoint> frontier;
        for (const auto& [time_s, energy_j, plan] : points) frontier.push_back({time_s, energy_j, plan});
        const DeadlineChoice choice = choose_for_deadline(frontier, deadline_s);
        return py::make_tuple(choice.index, choice.meets_deadline);
      },
      py::arg("frontier"), py::arg("deadline_s"),
      "Index of the least-energy (time_s, energy_j, plan) point meeting the deadline, and whether one does "
      "(else the fastest point).");

  module.def(
      "read_frontier",
      [](const std::filesystem::path& path) {
        std::vector<std::tuple<double, double, std::string>> points;
        for (const FrontierPoint& point : kareus::plan::read_frontier(path))
          points.emplace_back(point.time_s, point.energy_j, point.plan);
        return points;
      },
      py::arg("path"));

  module.def(
      "load_model", [](const std::string& name_or_path) { return model_dict(wl::load_model(name_or_path)); },
      py::arg("name_or_path"), "The shape of a model preset or model .json file, as a dict.");

  module.def(
      "load_gpu",
      [](const std::string& name_or_path) {
        const kareus::device::GpuSpec gpu = kareus::device::load_gpu(name_or_path);
        py::dict result;
        result["name"] = gpu.name;
        result["sm_count"] = gpu.sm_count;
        result["default_comm_ctas"] = gpu.default_comm_ctas;
        return result;
      },
      py::arg("name_or_path"), "name, sm_count and default_comm_ctas of a GPU preset or .json file.");
}

/// The workload (workload.h) and its partitions (partition.h).
void bind_workload(py::module_& module) {
  py::class_<wl::Workload>(module, "Workload")
      .def(py::init([](const std::string& model, int tp, int cp, int pp, int dp, int mbs, std::optional<int> seq,
                       int microbatches, int nanobatches, const std::string& recompute,
                       const std::vector<int>& layers_per_stage, bool sequence_parallel, int vpp) {
             wl::ModelSpec spec = wl::load_model(model);
             if (recompute != "full" && recompute != "none") {
               throw kareus::InputError("--recompute " + recompute + ": expected full or none");
             }
             const int tokens = seq ? *seq : wl::default_sequence(spec);
             const wl::Parallelism parallel{
                 .tp = tp,
                 .cp = cp,
                 .pp = pp,
                 .dp = dp,
                 .mbs = mbs,
                 .seq = tokens,
                 .microbatches = microbatches,
                 .nanobatches = nanobatches,
                 .recompute = recompute == "full" ? wl::Recompute::kFull : wl::Recompute::kNone,
                 .layers_per_stage = layers_per_stage,
                 .sequence_parallel = sequence_parallel,
                 .vpp = vpp};
             return wl::make_workload(std::move(spec), parallel);
           }),
           py::arg("model"), py::arg("tp") = 1, py::arg("cp") = 1, py::arg("pp") = 1, py::arg("dp") = 1,
           py::arg("mbs") = 2, py::arg("seq") = py::none(), py::arg("microbatches") = 1, py::arg("nanobatches") = 2,
           py::arg("recompute") = "full", py::arg("layers_per_stage") = std::vector<int>{},
           py::arg("sequence_parallel") = false, py::arg("vpp") = 1,
           "A model under a parallelism (workload.h); seq None is the model's default (4096, or its "
           "max_positions when smaller); throws InputError naming the flag that breaks a rule.")
      .def_property_readonly("model", [](const wl::Workload& workload) { return model_dict(workload.model); })
      .def_property_readonly("parallel",
                             [](const wl::Workload& workload) {
                               const wl::Parallelism& p = workload.parallel;
                               py::dict result;
                               result["tp"] = p.tp;
                               result["cp"] = p.cp;
                               result["pp"] = p.pp;
                               result["dp"] = p.dp;
                               result["mbs"] = p.mbs;
                               result["seq"] = p.seq;
                               result["microbatches"] = p.microbatches;
                               result["nanobatches"] = p.nanobatches;
                               result["sequence_parallel"] = p.sequence_parallel;
                               result["vpp"] = p.vpp;
                               return result;
                             })
      .def_property_readonly("stage_layers", [](const wl::Workload& workload) { return workload.stage_layers; })
      .def(
          "chunk_layers",
          [](const wl::Workload& workload, int stage, int chunk) {
            if (stage < 0 || stage >= workload.parallel.pp || chunk < 0 || chunk >= workload.parallel.vpp) {
              throw kareus::InputError("chunk_layers: stage " + std::to_string(stage) + " chunk " +
                                       std::to_string(chunk) + " is outside pp " +
                                       std::to_string(workload.parallel.pp) + " x vpp " +
                                       std::to_string(workload.parallel.vpp));
            }
            return std::pair{workload.chunk_first_layer(stage, chunk), workload.chunk_layers(stage)};
          },
          py::arg("stage"), py::arg("chunk"),
          "(first layer, layer count) of model chunk `chunk` of `stage`: Megatron's interleaved layer split.")
      .def_property_readonly("recompute",
                             [](const wl::Workload& workload) {
                               return workload.parallel.recompute == wl::Recompute::kFull ? "full" : "none";
                             })
      .def(
          "partitions",
          [](const wl::Workload& workload, int stage, const std::string& direction) {
            return partitions_of(workload, stage, kareus::parse_direction(direction, "direction"));
          },
          py::arg("stage"), py::arg("direction"),
          "The partitions of one instruction of `stage` (\"forward\" or \"backward\") in execution order: dicts "
          "of key, direction, layer, nanobatch, searchable, ops [{name, kind, layer}], slots [{name, first_op}], "
          "collective (None or {name, kind, group, group_size, bytes, nanobatch, layer}).")
      .def(
          "comm_configs",
          [](const wl::Workload& workload, int stage, const std::string& direction,
             const std::map<std::string, part::CommConfig>& configs, int default_ctas) {
            if (stage < 0 || stage >= workload.parallel.pp) {
              throw kareus::InputError("stage " + std::to_string(stage) + " is outside 0.." +
                                       std::to_string(workload.parallel.pp - 1));
            }
            const part::CommConfigs planned(configs.begin(), configs.end());
            std::vector<std::optional<part::CommConfig>> result;
            for (const part::Partition& partition :
                 part::build_partitions(workload, stage, kareus::parse_direction(direction, "direction"))) {
              result.push_back(part::comm_config_for(partition, planned, default_ctas));
            }
            return result;
          },
          py::arg("stage"), py::arg("direction"), py::arg("configs"), py::arg("default_ctas"),
          "The CommConfig each partition of partitions(stage, direction) runs with, given an instruction's "
          "checked configs (None without a collective): the planned one, at the instance's first slot when it "
          "lacks the planned slot; trails and keys without a config at default_ctas (the GPU's "
          "default_comm_ctas) and their first slot (partition/comm_fit.h).")
      .def(
          "instruction_passes",
          [](const wl::Workload& workload, const std::string& type) {
            std::vector<std::string> passes;
            for (const kareus::Direction pass :
                 part::instruction_passes(workload, kareus::parse_direction(type, "instruction type"))) {
              passes.emplace_back(to_string(pass));
            }
            return passes;
          },
          py::arg("type"),
          "The directions an instruction of `type` runs, in order: [\"forward\", \"backward\"] for a backward "
          "under full recompute, else [type].")
      .def("searchable_keys", [](const wl::Workload& workload) { return part::searchable_keys(workload); })
      .def(
          "representative_slots",
          [](const wl::Workload& workload, const std::string& key) {
            std::vector<std::string> names;
            for (const part::Slot& slot : part::representative_partition(workload, key).slots)
              names.push_back(slot.name);
            return names;
          },
          py::arg("key"),
          "Slot names of the steady-state partition of a searchable key (the space the search chose from).")
      .def("to_json", [](const wl::Workload& workload) { return wl::workload_to_json(workload); });
}

/// The runtime (runtime.h) one training process follows a plan with.
void bind_runtime(py::module_& module) {
  py::class_<Runtime>(module, "Runtime")
      .def(py::init([](const std::filesystem::path& plan, int rank, int tp, int cp, int pp, int dp, int gpu_index,
                       const std::string& clock_backend, bool install_signal_handlers, bool strict_clocks) {
             RuntimeOptions options;
             options.plan_path = plan;
             options.rank = rank;
             options.degrees = {tp, cp, pp, dp};
             options.gpu_index = gpu_index;
             options.clock_backend = clock_backend;
             options.install_signal_handlers = install_signal_handlers;
             options.strict_clocks = strict_clocks;
             return std::make_unique<Runtime>(options);
           }),
           py::arg("plan"), py::arg("rank") = 0, py::arg("tp") = 1, py::arg("cp") = 1, py::arg("pp") = 1,
           py::arg("dp") = 1, py::arg("gpu_index") = 0, py::arg("clock_backend") = "recorder",
           py::arg("install_signal_handlers") = false, py::arg("strict_clocks") = false)
      .def("on_step_begin", &Runtime::on_step_begin)
      .def(
          "on_instruction_begin",
          [](Runtime& runtime, const std::string& name, std::optional<int> microbatch, int chunk) {
            runtime.on_instruction_begin(kareus::parse_direction(name, "instruction type"), microbatch, chunk);
          },
          py::arg("name"), py::arg("microbatch") = py::none(), py::arg("chunk") = 0)
      .def("on_instruction_end", &Runtime::on_instruction_end)
      .def("on_step_end", &Runtime::on_step_end)
      .def(
          "comm_config", [](const Runtime& runtime, const std::string& key) { return runtime.comm_config(key); },
          py::arg("partition_key"))
      .def("switch_plan", py::overload_cast<const std::filesystem::path&>(&Runtime::switch_plan), py::arg("plan"))
      .def(
          "switch_for_deadline",
          [](Runtime& runtime, const std::filesystem::path& frontier, double deadline_s) {
            const auto result = runtime.switch_for_deadline(frontier, deadline_s);
            return py::make_tuple(result.point.plan, result.meets_deadline);
          },
          py::arg("frontier"), py::arg("deadline_s"))
      .def("flush", &Runtime::flush, py::call_guard<py::gil_scoped_release>())
      .def("timeline",
           [](const Runtime& runtime) {
             std::vector<std::tuple<double, int, int>> samples;
             for (const ClockSample& sample : runtime.timeline()) {
               samples.emplace_back(sample.time_s, sample.requested_mhz, sample.effective_mhz);
             }
             return samples;
           })
      .def_property_readonly("failed_clock_changes", &Runtime::failed_clock_changes)
      .def_property_readonly("skipped_clock_changes", &Runtime::skipped_clock_changes)
      .def_property_readonly("stage", &Runtime::stage)
      .def_property_readonly("in_step", [](const Runtime& runtime) { return runtime.cursor().in_step(); });
}

}  // namespace

PYBIND11_MODULE(_runtime, module) {
  module.doc() = "kareus runtime: follow a kareus.plan/1 plan from a training loop";
  bind_errors(module);
  bind_rank_mapping(module);
  bind_comm_config(module);
  bind_plan(module);
  bind_pipeline_order(module);
  bind_presets(module);
  bind_workload(module);
  bind_runtime(module);
}
