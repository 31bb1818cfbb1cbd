// NVML's nvmlErrorString texts for the return codes the stand-in libraries give (tests/nvml's
// fake and tests/nvml_standin), so both answer as the real library does from one table.
#pragma once

inline const char* nvml_error_text(int code) {
  switch (code) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 7:
      return "Insufficient Size";
    case 9:
      return "Driver Not Loaded";
    case 15:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}
