// libFuzzer target for kareusd's request handling: any byte string given to DaemonCore as a
// request line must yield exactly one valid JSON reply line, never a crash or an exception; a
// request that parses must format back to itself; and no reply may leave a GPU at a clock it
// does not support.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "kareus/common/error.h"
#include "kareus/runtime/clock_backend.h"
#include "kareus/runtime/daemon.h"
#include "kareus/runtime/daemon_protocol.h"

using namespace kareus::runtime;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  try {
    const DaemonRequest request = parse_daemon_request(line);
    std::string formatted = format_daemon_request(request);
    formatted.pop_back();
    if (!(parse_daemon_request(formatted) == request)) std::abort();
  } catch (const kareus::InputError&) {
    // Expected for most inputs; anything else escaping is a bug the fuzzer reports.
  }
  const std::vector<int> clocks = {1980, 1410, 1005};
  std::vector<std::unique_ptr<ClockBackend>> gpus;
  auto recorder = std::make_unique<RecorderClockBackend>(clocks);
  RecorderClockBackend* gpu0 = recorder.get();
  gpus.push_back(std::move(recorder));
  DaemonCore core(std::move(gpus), 1e9);
  const auto client = core.connect({1, 0, 0});
  std::string reply = core.handle_line(client, line, 0.0);
  if (reply.empty() || reply.back() != '\n' || reply.find('\n') != reply.size() - 1) std::abort();
  reply.pop_back();
  (void)parse_daemon_reply(reply);  // throws (and so fails the run) if the reply is not valid JSON
  if (const auto locked = gpu0->locked_clock_mhz(); locked && *locked != 1980 && *locked != 1410 && *locked != 1005) {
    std::abort();
  }
  return 0;
}
