#include "kareus/runtime/kareus_runtime.h"

#include <exception>
#include <optional>
#include <string>

#include "kareus/common/error.h"
#include "kareus/runtime/runtime.h"

struct kareus_runtime {
  std::unique_ptr<kareus::runtime::Runtime> runtime;
};

namespace {

thread_local std::string last_error;

template <typename Function>
kareus_status guarded(Function&& function) {
  try {
    function();
    last_error.clear();
    return KAREUS_OK;
  } catch (const kareus::InputError& error) {
    last_error = error.what();
    return KAREUS_INPUT_ERROR;
  } catch (const std::exception& error) {
    last_error = error.what();
    return KAREUS_FAILURE;
  } catch (...) {
    last_error = "unknown failure";
    return KAREUS_FAILURE;
  }
}

kareus_status null_argument(const char* what) {
  last_error = std::string(what) + " is NULL";
  return KAREUS_INVALID_ARGUMENT;
}

/// The instruction type of the C API as the runtime's, or nullopt (last_error set) when it is neither.
std::optional<kareus::Direction> instruction_type(int type) {
  if (type == KAREUS_FORWARD) return kareus::Direction::kForward;
  if (type == KAREUS_BACKWARD) return kareus::Direction::kBackward;
  last_error = "instruction type must be KAREUS_FORWARD or KAREUS_BACKWARD, found " + std::to_string(type);
  return std::nullopt;
}

}  // namespace

extern "C" {

kareus_runtime_options kareus_runtime_default_options(void) {
  kareus_runtime_options options{};
  options.tp = options.cp = options.pp = options.dp = 1;
  options.clock_backend = "recorder";
  return options;
}

kareus_status kareus_runtime_init(const kareus_runtime_options* options, kareus_runtime** out) {
  if (out == nullptr) return null_argument("out");
  *out = nullptr;
  if (options == nullptr) return null_argument("options");
  if (options->plan_path == nullptr) return null_argument("options->plan_path");
  return guarded([&] {
    kareus::runtime::RuntimeOptions converted;
    converted.plan_path = options->plan_path;
    converted.rank = options->rank;
    converted.degrees = {options->tp, options->cp, options->pp, options->dp};
    converted.gpu_index = options->gpu_index;
    converted.clock_backend = options->clock_backend != nullptr ? options->clock_backend : "recorder";
    converted.install_signal_handlers = options->install_signal_handlers != 0;
    converted.strict_clocks = options->strict_clocks != 0;
    auto handle = std::make_unique<kareus_runtime>();
    handle->runtime = std::make_unique<kareus::runtime::Runtime>(converted);
    *out = handle.release();
  });
}

void kareus_runtime_free(kareus_runtime* runtime) { delete runtime; }

kareus_status kareus_runtime_on_step_begin(kareus_runtime* runtime) {
  if (runtime == nullptr) return null_argument("runtime");
  return guarded([&] { runtime->runtime->on_step_begin(); });
}

kareus_status kareus_runtime_on_instruction_begin(kareus_runtime* runtime, int type, int microbatch) {
  if (runtime == nullptr) return null_argument("runtime");
  const auto converted = instruction_type(type);
  if (!converted) return KAREUS_INPUT_ERROR;
  return guarded([&] {
    runtime->runtime->on_instruction_begin(*converted, microbatch < 0 ? std::nullopt : std::optional<int>(microbatch));
  });
}

kareus_status kareus_runtime_on_chunk_instruction_begin(kareus_runtime* runtime, int type, int microbatch, int chunk) {
  if (runtime == nullptr) return null_argument("runtime");
  const auto converted = instruction_type(type);
  if (!converted) return KAREUS_INPUT_ERROR;
  if (microbatch < 0 || chunk < 0) {
    last_error = "kareus_runtime_on_chunk_instruction_begin: microbatch and chunk must be >= 0, found microbatch " +
                 std::to_string(microbatch) + " chunk " + std::to_string(chunk);
    return KAREUS_INPUT_ERROR;
  }
  return guarded([&] { runtime->runtime->on_instruction_begin(*converted, microbatch, chunk); });
}

kareus_status kareus_runtime_on_instruction_end(kareus_runtime* runtime) {
  if (runtime == nullptr) return null_argument("runtime");
  return guarded([&] { runtime->runtime->on_instruction_end(); });
}

kareus_status kareus_runtime_on_step_end(kareus_runtime* runtime) {
  if (runtime == nullptr) return null_argument("runtime");
  return guarded([&] { runtime->runtime->on_step_end(); });
}

kareus_status kareus_runtime_comm_config(kareus_runtime* runtime, const char* partition_key, int* ctas,
                                         const char** slot) {
  if (runtime == nullptr) return null_argument("runtime");
  if (partition_key == nullptr) return null_argument("partition_key");
  if (ctas == nullptr) return null_argument("ctas");
  if (slot == nullptr) return null_argument("slot");
  return guarded([&] {
    const kareus::partition::CommConfig& config = runtime->runtime->comm_config(partition_key);
    *ctas = config.ctas;
    *slot = config.slot.c_str();
  });
}

kareus_status kareus_runtime_switch_plan(kareus_runtime* runtime, const char* plan_path) {
  if (runtime == nullptr) return null_argument("runtime");
  if (plan_path == nullptr) return null_argument("plan_path");
  return guarded([&] { runtime->runtime->switch_plan(std::filesystem::path(plan_path)); });
}

kareus_status kareus_runtime_switch_for_deadline(kareus_runtime* runtime, const char* frontier_path, double deadline_s,
                                                 int* meets_deadline) {
  if (runtime == nullptr) return null_argument("runtime");
  if (frontier_path == nullptr) return null_argument("frontier_path");
  return guarded([&] {
    const auto result = runtime->runtime->switch_for_deadline(frontier_path, deadline_s);
    if (meets_deadline != nullptr) *meets_deadline = result.meets_deadline ? 1 : 0;
  });
}

kareus_status kareus_runtime_flush(kareus_runtime* runtime) {
  if (runtime == nullptr) return null_argument("runtime");
  return guarded([&] { runtime->runtime->flush(); });
}

kareus_status kareus_runtime_stage(const kareus_runtime* runtime, int* stage) {
  if (runtime == nullptr) return null_argument("runtime");
  if (stage == nullptr) return null_argument("stage");
  *stage = runtime->runtime->stage();
  last_error.clear();
  return KAREUS_OK;
}

const char* kareus_last_error(void) { return last_error.c_str(); }

}  // extern "C"
