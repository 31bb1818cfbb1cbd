// kareus._runtime: the C++ runtime (runtime.h) for Python training loops.
//
// A thin pybind11 layer: kareus::InputError becomes kareus.InputError (a ValueError) and
// kareus::Error becomes kareus.KareusError (a RuntimeError); calls that wait release the GIL.
// The user-facing class is kareus.PipelineFrequencyOptimizer (python/kareus/__init__.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "kareus/common/error.h"
#include "kareus/runtime/deadline.h"
#include "kareus/runtime/rank_mapping.h"
#include "kareus/runtime/runtime.h"

namespace py = pybind11;
using namespace kareus::runtime;

namespace {

kareus::pipeline::InstructionType parse_type(const std::string& name) {
  return kareus::pipeline::parse_instruction_type(name, "instruction name");
}

}  // namespace

PYBIND11_MODULE(_runtime, module) {
  module.doc() = "kareus runtime: follow a kareus.plan/1 plan from a training loop";
  static py::exception<kareus::Error> error_type(module, "KareusError", PyExc_RuntimeError);
  static py::exception<kareus::InputError> input_error_type(module, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const kareus::InputError& error) {
      input_error_type(error.what());
    } catch (const kareus::Error& error) {
      error_type(error.what());
    }
  });

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
        for (const FrontierPoint& point : read_frontier(path))
          points.emplace_back(point.time_s, point.energy_j, point.plan);
        return points;
      },
      py::arg("path"));

  py::class_<Runtime>(module, "Runtime")
      .def(py::init([](const std::filesystem::path& plan, int rank, int tp, int cp, int pp, int dp, int gpu_index,
                       const std::string& clock_backend, bool install_signal_handlers) {
             RuntimeOptions options;
             options.plan_path = plan;
             options.rank = rank;
             options.degrees = {tp, cp, pp, dp};
             options.gpu_index = gpu_index;
             options.clock_backend = clock_backend;
             options.install_signal_handlers = install_signal_handlers;
             return std::make_unique<Runtime>(options);
           }),
           py::arg("plan"), py::arg("rank") = 0, py::arg("tp") = 1, py::arg("cp") = 1, py::arg("pp") = 1,
           py::arg("dp") = 1, py::arg("gpu_index") = 0, py::arg("clock_backend") = "recorder",
           py::arg("install_signal_handlers") = false)
      .def("on_step_begin", &Runtime::on_step_begin)
      .def(
          "on_instruction_begin",
          [](Runtime& runtime, const std::string& name, std::optional<int> microbatch) {
            runtime.on_instruction_begin(parse_type(name), microbatch);
          },
          py::arg("name"), py::arg("microbatch") = py::none())
      .def("on_instruction_end", &Runtime::on_instruction_end)
      .def("on_step_end", &Runtime::on_step_end)
      .def(
          "comm_config",
          [](const Runtime& runtime, const std::string& key) {
            const auto& config = runtime.comm_config(key);
            return py::make_tuple(config.ctas, config.slot);
          },
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
      .def_property_readonly("stage", &Runtime::stage)
      .def_property_readonly("in_step", [](const Runtime& runtime) { return runtime.cursor().in_step(); });
}
