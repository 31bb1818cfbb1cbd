// libFuzzer target for one line of a measurement log (kareus.measurement/1): any bytes parse or
// throw InputError, and a parsed record writes back to a line that parses to the same numbers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kareus/common/error.h"
#include "kareus/device/measurement_log.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  try {
    const kareus::device::MeasurementRecord record = kareus::device::parse_measurement_line(line, "fuzz.jsonl:1");
    const kareus::device::MeasurementRecord again =
        kareus::device::parse_measurement_line(kareus::device::to_json_line(record), "written.jsonl:1");
    if (again.time_s != record.time_s || again.energy_j != record.energy_j || !(again.config == record.config)) {
      std::abort();
    }
  } catch (const kareus::InputError&) {
  }
  return 0;
}
