// libFuzzer target for the frontier reader (kareus.frontier/1, what switch_for_deadline reads):
// any bytes parse or throw InputError, and a parsed frontier answers every deadline.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kareus/common/error.h"
#include "kareus/plan/frontier.h"
#include "kareus/runtime/deadline.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto frontier = kareus::plan::parse_frontier(text, "out/frontier.json");
    if (frontier.empty()) std::abort();
    for (double deadline_s : {0.0, 1.0, 1e300}) {
      if (kareus::runtime::choose_for_deadline(frontier, deadline_s).index >= frontier.size()) std::abort();
    }
  } catch (const kareus::InputError&) {
  }
  return 0;
}
