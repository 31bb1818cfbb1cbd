#include "kareus/runtime/nvml_clock_backend.h"

#include <utility>

#include <fmt/format.h>

namespace kareus::runtime {

NvmlClockBackend::NvmlClockBackend(std::shared_ptr<nvml::NvmlLibrary> library, int gpu_index)
    : library_(std::move(library)), gpu_index_(gpu_index) {
  library_->check_device(gpu_index_);
}

std::string NvmlClockBackend::describe() const { return fmt::format("nvml gpu {}", gpu_index_); }

}  // namespace kareus::runtime
