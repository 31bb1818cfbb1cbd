// libFuzzer target for the plan parser (kareus.plan/1): any bytes either parse into a plan that
// writes back to text parsing to the same plan, or throw InputError; nothing else escapes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kareus/common/error.h"
#include "kareus/plan/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const kareus::plan::Plan plan = kareus::plan::parse_plan(text, "fuzz.json");
    const std::string written = kareus::plan::plan_to_json(plan);
    if (kareus::plan::plan_to_json(kareus::plan::parse_plan(written, "written.json")) != written) std::abort();
  } catch (const kareus::InputError&) {
  }
  return 0;
}
