// The CUDA backend's stand-in when CMake found no CUDA compiler: the kareus binary still builds
// and runs, and asking for the backend says why it is missing.
#include "kareus/device/cuda_device.h"

#include "kareus/common/error.h"

namespace kareus::device {

bool cuda_backend_compiled() { return false; }

struct CudaDevice::Impl {};

CudaDevice::CudaDevice(GpuSpec, workload::Workload, CudaDeviceOptions) {
  throw Error(
      "kareus was built without the CUDA backend (CMake found no CUDA compiler): install the CUDA toolkit, "
      "put nvcc on PATH and rebuild, or use the emulator (--backend emulator)");
}

CudaDevice::~CudaDevice() = default;

const GpuSpec& CudaDevice::gpu() const { throw Error("the CUDA backend is not compiled in"); }

MeasurementDetails CudaDevice::last_details() const { return {}; }

std::string CudaDevice::device_name() const { return {}; }

Measurement CudaDevice::measure(const partition::Partition&, const partition::KnobConfig&) {
  throw Error("the CUDA backend is not compiled in");
}

ClockSwitchResult CudaDevice::measure_clock_switch(int, int) { throw Error("the CUDA backend is not compiled in"); }

}  // namespace kareus::device
