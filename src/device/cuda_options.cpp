// The CUDA backend's options that need no CUDA: parsed on every build, so flags are checked
// the same way with and without the backend compiled in.
#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/device/cuda_device.h"

namespace kareus::device {

CollectiveBackend parse_collective_backend(const std::string& text) {
  if (text == "auto") return CollectiveBackend::kAuto;
  if (text == "nccl") return CollectiveBackend::kNccl;
  if (text == "proxy") return CollectiveBackend::kProxy;
  throw InputError(fmt::format("--collective {}: expected auto, nccl or proxy", text));
}

}  // namespace kareus::device
