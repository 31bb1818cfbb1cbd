// libFuzzer target for the model parser (data/models/*.json format): any bytes parse or throw
// InputError, and a parsed model's shape is positive.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kareus/common/error.h"
#include "kareus/workload/model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const kareus::workload::ModelSpec model = kareus::workload::parse_model(text, "fuzz.json");
    if (model.hidden < 1 || model.heads < 1 || model.layers < 1 || model.heads % model.kv_groups != 0) std::abort();
    (void)kareus::workload::model_shape_json(model);
  } catch (const kareus::InputError&) {
  }
  return 0;
}
