// libFuzzer target: `kareus serve`'s request handling (PfoService::handle, so routing, body and
// query parsing and the job state behind them), its HTTP request parser (fed in two pieces, its
// bounds checked) and the artifact files' Python-literal reader.
// The first byte picks the entry point; the rest is the body, query or file text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "interop/python_literal.h"
#include "kareus/common/error.h"
#include "kareus/interop/http_request_parser.h"
#include "kareus/interop/pfo_service.h"

namespace {

using namespace kareus;

interop::PfoService& service() {
  static interop::PfoService* instance = [] {
    std::vector<interop::ServedPlan> frontier;
    for (int variant = 0; variant < 2; ++variant) {
      plan::Plan plan;
      for (int stage = 0; stage < 2; ++stage) {
        plan::StagePlan stage_plan{stage, {}};
        for (const auto& instruction : pipeline::one_f_one_b(stage, 2, 2)) {
          stage_plan.instructions.push_back({instruction.type,
                                             instruction.microbatch,
                                             1410 - 15 * variant,
                                             workload::OverlapMode::kNanobatch,
                                             {{"fwd_attn", {"norm_0", 12}}}});
        }
        plan.stages.push_back(stage_plan);
      }
      frontier.push_back({4.0 + variant, 3000.0 - 500 * variant, "plan", plan});
    }
    auto* created = new interop::PfoService(std::move(frontier), nullptr, {64, 4096});
    const interop::HttpResponse job = created->handle(
        {"POST", "/register_job", {}, R"({"pp_degree": 2, "dp_degree": 1, "tp_degree": 2, "world_size": 4})"});
    if (job.status != 200 || job.body != "\"kareus-0-dp1-pp2-tp2\"") __builtin_trap();
    return created;
  }();
  return *instance;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string job = "/kareus-0-dp1-pp2-tp2";
  interop::HttpResponse response;
  switch (data[0] % 8) {
    case 0:
      response = service().handle({"POST", "/register_job", {}, text});
      break;
    case 1:
      response = service().handle({"POST", "/register_rank" + job, {}, text});
      break;
    case 2:
      response =
          service().handle({"GET", (data[0] & 0x80 ? "/comm_schedule" : "/schedule") + job, {{"rank", text}}, ""});
      break;
    case 3:
      response = service().handle({"POST", "/deadline" + job, {}, text});
      break;
    case 4:
      response = service().handle({"POST", "/result" + job, {}, text});
      break;
    case 5: {
      // "METHOD PATH\nBODY"
      const std::size_t space = text.find(' ');
      const std::size_t newline = text.find('\n');
      if (space == std::string::npos || newline == std::string::npos || newline < space) return 0;
      response = service().handle({text.substr(0, space),
                                   text.substr(space + 1, newline - space - 1),
                                   {{"rank", "1"}},
                                   text.substr(newline + 1)});
      break;
    }
    case 6: {
      // Small bounds, so that the fuzzer reaches them; the split point comes from the first byte.
      interop::HttpRequestParser parser({64, 256, 8});
      const std::size_t split = text.size() * (data[0] >> 3) / 32;
      std::size_t consumed = parser.feed(std::string_view(text).substr(0, split));
      if (consumed == split && parser.state() == interop::HttpRequestParser::State::kNeedMore) {
        consumed += parser.feed(std::string_view(text).substr(split));
      }
      if (consumed > text.size()) __builtin_trap();
      if (parser.state() == interop::HttpRequestParser::State::kComplete && parser.take().request.body.size() > 64) {
        __builtin_trap();
      }
      return 0;
    }
    default:
      try {
        (void)interop::detail::parse_python_literal(text, "fuzz.py");
      } catch (const InputError&) {
      }
      return 0;
  }
  // Every answer is a status we define with a JSON body; a 500 means an unexpected exception.
  if (response.status == 500 || response.body.empty()) __builtin_trap();
  return 0;
}
