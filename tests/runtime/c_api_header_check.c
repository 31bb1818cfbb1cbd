/* Compiles kareus_runtime.h as C (not C++), so the C API stays usable from C and FFIs. */
#include "kareus/runtime/kareus_runtime.h"

int kareus_c_api_header_check(void);

int kareus_c_api_header_check(void) {
  kareus_runtime_options options = kareus_runtime_default_options();
  kareus_runtime* runtime = 0;
  kareus_status status = kareus_runtime_init(&options, &runtime);
  kareus_runtime_free(runtime);
  return status == KAREUS_OK ? 0 : (int)kareus_last_error()[0];
}
