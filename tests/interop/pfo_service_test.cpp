#include "kareus/interop/pfo_service.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_error.h"
#include "common/scratch.h"
#include "interop_test_plans.h"
#include "kareus/common/file_io.h"
#include "kareus/interop/pfo_protocol.h"

namespace kareus::interop {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

/// How a 404 for a job explains itself under the default limits.
const std::string kForgotten =
    " (never registered, or forgotten: the server keeps the 1024 most recently used jobs and 1048576 ranks)";

/// Three frontier points: (4.0 s, 3000 J), (4.5 s, 2500 J), (5.0 s, 2200 J), clocks by variant.
std::vector<ServedPlan> three_points() {
  const workload::Workload workload = testing::test_workload(1, 4);
  std::vector<ServedPlan> frontier;
  for (int variant = 0; variant < 3; ++variant) {
    frontier.push_back({4.0 + 0.5 * variant,
                        3000.0 - (variant == 0   ? 0
                                  : variant == 1 ? 500
                                                 : 800),
                        fmt::format("plan_{}.json", variant), testing::test_plan(workload, true, variant)});
  }
  return frontier;
}

HttpResponse post(PfoService& service, const std::string& path, const json& body) {
  return service.handle({"POST", path, {}, body.dump()});
}

HttpResponse get(PfoService& service, const std::string& path, const std::string& rank) {
  return service.handle({"GET", path, {{"rank", rank}}, ""});
}

json job_body(int pp, int dp, int tp, int world) {
  return {{"job_id", ""},    {"pp_degree", pp},     {"dp_degree", dp},
          {"tp_degree", tp}, {"world_size", world}, {"job_metadata", nullptr}};
}

std::string register_job(PfoService& service, int pp = 2, int dp = 1, int tp = 8) {
  const HttpResponse response = post(service, "/register_job", job_body(pp, dp, tp, pp * dp * tp));
  EXPECT_EQ(response.status, 200) << response.body;
  return json::parse(response.body).get<std::string>();
}

json rank_body(int rank, int pp_rank, int tp_rank, std::vector<int> clocks = {}) {
  return {
      {"rank", rank}, {"dp_rank", 0}, {"pp_rank", pp_rank}, {"tp_rank", tp_rank}, {"available_frequencies", clocks}};
}

/// The expected [instruction, MHz] list of `stage` in `plan`.
json stage_frequencies(const plan::Plan& plan, int stage) {
  json list = json::array();
  for (const auto& instruction : plan.stages[stage].instructions) {
    list.push_back({std::string(kareus::to_string(instruction.type)), instruction.freq_mhz});
  }
  return list;
}

TEST(PfoService, SixteenRanksGetTheirStagesClocks) {
  const auto frontier = three_points();
  PfoService service(frontier, nullptr);
  const std::string job = register_job(service);
  EXPECT_THAT(job, ::testing::StartsWith("kareus-0-dp1-pp2-tp8"));
  // Megatron's layout: rank = pp_rank * 8 + tp_rank; register in a scrambled order.
  for (int index = 0; index < 16; ++index) {
    const int rank = (index * 5) % 16;
    EXPECT_EQ(post(service, "/register_rank/" + job, rank_body(rank, rank / 8, rank % 8)).body, "null");
  }
  for (int rank = 0; rank < 16; ++rank) {
    SCOPED_TRACE(rank);
    const HttpResponse response = get(service, "/schedule/" + job, std::to_string(rank));
    ASSERT_EQ(response.status, 200);
    const json body = json::parse(response.body);
    EXPECT_EQ(body["rank"], rank);
    EXPECT_EQ(body["frequencies"], stage_frequencies(frontier[0].plan, rank / 8));  // the fastest plan
    EXPECT_EQ(body["frequencies"].size(), 8u);
  }
  const json comm = json::parse(get(service, "/comm_schedule/" + job, "9").body);
  EXPECT_EQ(comm["stage"], 1);
  EXPECT_EQ(comm["plan_index"], 0);
  const auto& planned = frontier[0].plan.stages[1].instructions[1];
  EXPECT_EQ(comm["instructions"][1]["type"], "backward");
  EXPECT_EQ(comm["instructions"][1]["partitions"]["bwd_mlp"]["ctas"], planned.partitions.at("bwd_mlp").ctas);
  EXPECT_EQ(comm["instructions"][1]["partitions"]["fwd_attn"]["slot"], planned.partitions.at("fwd_attn").slot);
}

TEST(PfoService, DeadlinePicksTheLeastEnergyPointThatMeetsIt) {
  const auto frontier = three_points();
  PfoService service(frontier, nullptr);
  const std::string job = register_job(service);
  ASSERT_EQ(post(service, "/register_rank/" + job, rank_body(3, 0, 3)).status, 200);
  struct Case {
    double deadline_s;
    int index;
    bool meets;
  };
  for (const Case& row :
       {Case{4.7, 1, true}, Case{5.0, 2, true}, Case{9, 2, true}, Case{4.0, 0, true}, Case{3.9, 0, false}}) {
    SCOPED_TRACE(row.deadline_s);
    const HttpResponse response = post(service, "/deadline/" + job, {{"deadline_s", row.deadline_s}});
    ASSERT_EQ(response.status, 200) << response.body;
    const json answer = json::parse(response.body);
    EXPECT_EQ(answer["plan_index"], row.index);
    EXPECT_EQ(answer["meets_deadline"], row.meets);
    EXPECT_EQ(answer["plan"], frontier[row.index].path);
    const json schedule = json::parse(get(service, "/schedule/" + job, "3").body);
    EXPECT_EQ(schedule["frequencies"], stage_frequencies(frontier[row.index].plan, 0));
  }
  // Another job keeps the fastest plan.
  const std::string other = register_job(service);
  ASSERT_EQ(post(service, "/register_rank/" + other, rank_body(3, 0, 3)).status, 200);
  EXPECT_EQ(json::parse(get(service, "/schedule/" + other, "3").body)["frequencies"],
            stage_frequencies(frontier[0].plan, 0));
}

TEST(PfoService, BadRequestsNameTheField) {
  PfoService service(three_points(), nullptr);
  const std::string job = register_job(service);
  struct Case {
    std::string path;
    std::string body;
    int status;
    std::string field;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {"/register_job", job_body(2, 1, 8, 15).dump(), 400, "world_size",
       "field 'world_size' must equal pp_degree x dp_degree x tp_degree = 2 x 1 x 8 = 16, found 15"},
      {"/register_job", job_body(4, 1, 4, 16).dump(), 400, "pp_degree",
       "field 'pp_degree' must be the served plans' 2 pipeline stages, found 4"},
      {"/register_job", R"({"pp_degree": 2, "dp_degree": 1, "tp_degree": 8})", 400, "world_size",
       "missing field 'world_size'"},
      {"/register_job", R"({"pp_degree": "2", "dp_degree": 1, "tp_degree": 8, "world_size": 16})", 400, "pp_degree",
       "field 'pp_degree' must be an integer, found string"},
      {"/register_job", R"({"pp_degree": 0, "dp_degree": 1, "tp_degree": 8, "world_size": 0})", 400, "pp_degree",
       "field 'pp_degree' must be an integer in 1..1048576, found 0"},
      {"/register_job", R"({"job_id": "mine", "pp_degree": 2, "dp_degree": 1, "tp_degree": 8, "world_size": 16})", 400,
       "job_id", "field 'job_id' must be empty (the server assigns the job id)"},
      {"/register_job", R"({"pp_degree": 2, "dp_degree": 1, "tp_degree": 8, "world_size": 16, "pp": 2})", 400, "pp",
       "unknown field 'pp' (expected job_id, pp_degree, dp_degree, tp_degree, world_size, job_metadata)"},
      {"/register_job", "{\"pp_degree\": 2,", 400, "", "request body is not valid JSON"},
      {"/register_job", "[1]", 400, "", "request body must be a JSON object"},
      {"/register_job", std::string(20, '[') + std::string(20, ']'), 400, "",
       "request body nests deeper than 16 levels"},
      {"/register_rank/" + job, rank_body(16, 1, 0).dump(), 400, "rank",
       "field 'rank' must be below the job's world_size 16, found 16"},
      {"/register_rank/" + job, rank_body(1, 2, 1).dump(), 400, "pp_rank",
       "field 'pp_rank' must be below the job's pp_degree 2, found 2"},
      {"/register_rank/" + job, rank_body(1, 0, 1, {1410, 1395}).dump(), 400, "available_frequencies",
       fmt::format("field 'available_frequencies' lacks {} MHz, which stage 0 runs in plan_0.json",
                   testing::test_clock_mhz(0, Direction::kBackward, 0))},
      {"/register_rank/" + job,
       R"({"rank": 1, "dp_rank": 0, "pp_rank": 0, "tp_rank": 1, "available_frequencies": [1.5]})", 400,
       "available_frequencies[0]", "field 'available_frequencies[0]' must be an integer, found number"},
      {"/deadline/" + job, R"({"deadline_s": -1})", 400, "deadline_s",
       "field 'deadline_s' must be a positive number of seconds, found -1"},
      {"/deadline/" + job, R"({"deadline_s": "soon"})", 400, "deadline_s",
       "field 'deadline_s' must be a finite number, found string"},
      {"/result/" + job, R"({"rank": 0, "iter_time": [1.0, "x"], "iter_energy": []})", 400, "iter_time[1]",
       "field 'iter_time[1]' must be a finite number, found string"},
      {"/result/" + job, R"({"rank": 0, "iter_time": [], "iter_energy": [], "time_breakdown": {"forward": [1]}})", 400,
       "time_breakdown.forward[0]", "field 'time_breakdown.forward[0]' must be a list of numbers"},
      {"/result/" + job, R"({"rank": 99, "iter_time": [], "iter_energy": []})", 400, "rank",
       "field 'rank' must be below the job's world_size 16, found 99"},
      {"/register_rank/nope", rank_body(0, 0, 0).dump(), 404, "", "unknown job 'nope'" + kForgotten},
      {"/deadline/nope", R"({"deadline_s": 5})", 404, "", "unknown job 'nope'" + kForgotten},
      {"/result/nope", R"({"rank": 0, "iter_time": [], "iter_energy": []})", 404, "",
       "unknown job 'nope'" + kForgotten},
      {"/nothing", "{}", 404, "", "no route /nothing"},
      {"/schedule/" + job, "{}", 405, "", "method POST is not allowed on /schedule"},
  };
  for (const Case& row : cases) {
    SCOPED_TRACE(row.path + " " + row.body);
    const HttpResponse response = service.handle({"POST", row.path, {}, row.body});
    EXPECT_EQ(response.status, row.status);
    const json body = json::parse(response.body);
    EXPECT_EQ(body["detail"], row.detail);
    EXPECT_EQ(body.value("field", ""), row.field);
  }
}

TEST(PfoService, ScheduleQueriesAreChecked) {
  PfoService service(three_points(), nullptr);
  const std::string job = register_job(service);
  ASSERT_EQ(post(service, "/register_rank/" + job, rank_body(2, 0, 2)).status, 200);
  struct Case {
    std::string path;
    std::optional<std::string> rank;
    int status;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {"/schedule/" + job, std::nullopt, 400, "missing query parameter 'rank'"},
      {"/schedule/" + job, "two", 400, "query parameter 'rank' must be an integer in 0..1048575, found 'two'"},
      {"/schedule/" + job, "-1", 400, "query parameter 'rank' must be an integer in 0..1048575, found '-1'"},
      {"/schedule/" + job, "16", 400, "query parameter 'rank' must be below the job's world_size 16, found 16"},
      {"/schedule/" + job, "3", 409,
       fmt::format("rank 3 has not registered with job '{}' (POST /register_rank/{} first)", job, job)},
      {"/schedule/unknown", "0", 404, "unknown job 'unknown'" + kForgotten},
      {"/comm_schedule/unknown", "0", 404, "unknown job 'unknown'" + kForgotten},
  };
  for (const Case& row : cases) {
    SCOPED_TRACE(row.path + " " + row.rank.value_or("<none>"));
    HttpRequest request{"GET", row.path, {}, ""};
    if (row.rank) request.query["rank"] = *row.rank;
    const HttpResponse response = service.handle(request);
    EXPECT_EQ(response.status, row.status);
    EXPECT_EQ(json::parse(response.body)["detail"], row.detail);
  }
}

TEST(PfoService, DuplicateCoordinatesAreRefusedAndReRegistrationReplaces) {
  const auto frontier = three_points();
  PfoService service(frontier, nullptr);
  const std::string job = register_job(service);
  ASSERT_EQ(post(service, "/register_rank/" + job, rank_body(4, 0, 4)).status, 200);
  const HttpResponse clash = post(service, "/register_rank/" + job, rank_body(5, 0, 4));
  EXPECT_EQ(clash.status, 400);
  EXPECT_EQ(json::parse(clash.body)["detail"], "ranks 4 and 5 both claim dp_rank 0, pp_rank 0, tp_rank 4");
  // Rank 4 restarts as a stage-1 rank: its schedule follows, and its old coordinates are free.
  ASSERT_EQ(post(service, "/register_rank/" + job, rank_body(4, 1, 4)).status, 200);
  EXPECT_EQ(json::parse(get(service, "/schedule/" + job, "4").body)["frequencies"],
            stage_frequencies(frontier[0].plan, 1));
  EXPECT_EQ(post(service, "/register_rank/" + job, rank_body(5, 0, 4)).status, 200);
}

TEST(PfoService, PastMaxJobsTheLeastRecentlyUsedJobIsForgotten) {
  PfoService service(three_points(), nullptr, {2, 1024});
  const std::string first = register_job(service);
  const std::string second = register_job(service);
  ASSERT_EQ(post(service, "/register_rank/" + first, rank_body(0, 0, 0)).status, 200);  // first used last
  const std::string third = register_job(service);
  EXPECT_EQ(service.job_count(), 2u);
  EXPECT_EQ(get(service, "/schedule/" + first, "0").status, 200);
  const HttpResponse forgotten = post(service, "/register_rank/" + second, rank_body(0, 0, 0));
  EXPECT_EQ(forgotten.status, 404);
  EXPECT_EQ(json::parse(forgotten.body)["detail"],
            "unknown job '" + second +
                "' (never registered, or forgotten: the server keeps the 2 most recently used jobs and 1024 ranks)");
  EXPECT_EQ(post(service, "/register_rank/" + third, rank_body(0, 0, 0)).status, 200);
}

TEST(PfoService, RanksAreBoundedPerJobAndOverAllJobs) {
  PfoService service(three_points(), nullptr, {16, 4});
  const std::string first = register_job(service, 2, 1, 2);  // world size 4
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_EQ(post(service, "/register_rank/" + first, rank_body(rank, rank / 2, rank % 2)).status, 200);
  }
  // A rank at or past the world size is refused, and a rank registering again is not counted twice.
  EXPECT_EQ(post(service, "/register_rank/" + first, rank_body(4, 0, 0)).status, 400);
  ASSERT_EQ(post(service, "/register_rank/" + first, rank_body(2, 1, 0)).status, 200);
  EXPECT_EQ(service.rank_count(), 3u);
  const std::string second = register_job(service, 2, 1, 2);
  ASSERT_EQ(post(service, "/register_rank/" + second, rank_body(0, 0, 0)).status, 200);  // 4 ranks: fits
  EXPECT_EQ(service.job_count(), 2u);
  ASSERT_EQ(post(service, "/register_rank/" + second, rank_body(1, 0, 1)).status, 200);  // 5: first goes
  EXPECT_EQ(service.job_count(), 1u);
  EXPECT_EQ(service.rank_count(), 2u);
  EXPECT_EQ(get(service, "/schedule/" + first, "0").status, 404);
  // One job alone may not pass the bound: 503, and nothing is forgotten for it.
  PfoService small(three_points(), nullptr, {16, 2});
  const std::string wide = register_job(small, 2, 1, 2);
  ASSERT_EQ(post(small, "/register_rank/" + wide, rank_body(0, 0, 0)).status, 200);
  ASSERT_EQ(post(small, "/register_rank/" + wide, rank_body(1, 0, 1)).status, 200);
  const HttpResponse over = post(small, "/register_rank/" + wide, rank_body(2, 1, 0));
  EXPECT_EQ(over.status, 503);
  EXPECT_EQ(json::parse(over.body)["detail"], "job '" + wide + "' would hold more than the 2 ranks the server keeps");
  EXPECT_EQ(small.rank_count(), 2u);
}

TEST(PfoService, ResultsAreAppendedOneLineEachFromManyThreads) {
  const std::filesystem::path path = test_common::scratch_path("kareus_interop_results.jsonl");
  std::filesystem::remove(path);
  {
    ResultLog log(path);
    PfoService service(three_points(), &log);
    const std::string job = register_job(service);
    ASSERT_EQ(post(service, "/deadline/" + job, {{"deadline_s", 4.6}}).status, 200);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 16; ++rank) {
      threads.emplace_back([&service, &job, rank] {
        for (int post_index = 0; post_index < 10; ++post_index) {
          const json body = {{"rank", rank},
                             {"iter_time", {4.5 + post_index}},
                             {"iter_energy", {2500.0}},
                             {"time_breakdown", {{"forward", {{0.1, 0.2}}}}}};
          EXPECT_EQ(service.handle({"POST", "/result/" + job, {}, body.dump()}).status, 200);
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  double time_sum = 0;
  while (std::getline(in, line)) {
    const json entry = json::parse(line);
    EXPECT_EQ(entry["plan_index"], 1);
    EXPECT_EQ(entry["plan"], "plan_1.json");
    time_sum += entry["result"]["iter_time"][0].get<double>();
    ++lines;
  }
  EXPECT_EQ(lines, 160);
  EXPECT_DOUBLE_EQ(time_sum, 16 * (10 * 4.5 + 45));  // every post exactly once
  std::filesystem::remove(path);
  EXPECT_THAT(test_common::error_of([] { ResultLog bad("/nonexistent-dir/results.jsonl"); }),
              HasSubstr("--results /nonexistent-dir/results.jsonl: cannot open for appending"));
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const json kResult = {{"rank", 0}, {"iter_time", {4.5}}, {"iter_energy", {2500.0}}};

TEST(ResultLog, ACappedFileTakesWholeLinesOnlyAndRefusesTheRestWith507) {
  const std::filesystem::path path = test_common::scratch_path("kareus_results_cap.jsonl");
  std::filesystem::remove(path);
  std::size_t line_bytes = 0;
  {
    ResultLog log(path, 1024);
    PfoService service(three_points(), &log);
    const std::string job = register_job(service);
    ASSERT_EQ(post(service, "/result/" + job, kResult).status, 200);
    line_bytes = std::filesystem::file_size(path);
    int accepted = 1;
    HttpResponse refused;
    while ((refused = post(service, "/result/" + job, kResult)).status == 200) ++accepted;
    EXPECT_EQ(refused.status, 507);
    EXPECT_EQ(accepted, static_cast<int>(1024 / line_bytes));
    EXPECT_THAT(json::parse(refused.body)["detail"].get<std::string>(),
                HasSubstr(fmt::format("bytes would pass its cap of 1024 (--max-results-bytes); the result was not "
                                      "written")));
  }
  EXPECT_EQ(std::filesystem::file_size(path), (1024 / line_bytes) * line_bytes);
  std::filesystem::remove(path);
}

TEST(ResultLog, AWriteCutShortLeavesNoFragmentAndATornTailIsCutOffOnOpen) {
  const std::filesystem::path path = test_common::scratch_path("kareus_results_torn.jsonl");
  std::filesystem::remove(path);
  {
    std::ofstream torn(path, std::ios::binary);
    torn << "{\"whole\": 1}\n{\"torn";  // a crash of an older writer in the middle of a line
  }
  ResultLog log(path);
  EXPECT_EQ(log.dropped_tail_bytes(), 6u);
  EXPECT_EQ(read_all(path), "{\"whole\": 1}\n");
  PfoService service(three_points(), &log);
  const std::string job = register_job(service);
  // The file size limit stands in for a full disk: the write stops in the middle of the line.
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = std::filesystem::file_size(path) + 20;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const HttpResponse full = post(service, "/result/" + job, kResult);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, previous);
  EXPECT_EQ(full.status, 507);
  EXPECT_THAT(json::parse(full.body)["detail"].get<std::string>(),
              HasSubstr("write failed: File too large; the result was not written"));
  EXPECT_EQ(read_all(path), "{\"whole\": 1}\n");  // the fragment was taken back
  ASSERT_EQ(post(service, "/result/" + job, kResult).status, 200);
  const std::string text = read_all(path);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_EQ(json::parse(text.substr(text.find('\n') + 1))["result"]["rank"], 0);  // whole, not glued
  std::filesystem::remove(path);
}

TEST(ResultLog, RefusesWhatIsNotARegularFileAndASecondWriter) {
  EXPECT_EQ(test_common::error_of([] { ResultLog fifo("/dev/null"); }), "--results /dev/null: not a regular file");
  const std::filesystem::path path = test_common::scratch_path("kareus_results_twice.jsonl");
  ResultLog first(path);
  EXPECT_EQ(test_common::error_of([&] { ResultLog second(path); }),
            "--results " + path.string() + ": in use by another kareus serve (flock)");
  std::filesystem::remove(path);
}

TEST(ResultLog, AFileThatIsNotAResultsLogIsRefusedAndLeftAsItIs) {
  // A notes file without a final newline used to be "a torn last line" and cut to 0 bytes.
  const std::filesystem::path path = test_common::scratch_path("kareus_results_not_a_log.txt");
  for (const std::string& content : {std::string("my notes, no final newline"), std::string("line 1\nline 2\n"),
                                     std::string("{\"a torn line alone")}) {
    {
      std::ofstream other(path, std::ios::binary);
      other << content;
    }
    const std::string message = test_common::error_of([&] { ResultLog log(path); });
    EXPECT_THAT(message, HasSubstr("--results " + path.string() + ": ")) << content;
    EXPECT_THAT(message, HasSubstr("it is left as it is")) << content;
    EXPECT_EQ(read_all(path), content);
  }
  std::filesystem::remove(path);
}

TEST(PfoService, InvalidUtf8IsAnsweredNotThrown) {
  PfoService service(three_points(), nullptr);
  const HttpResponse response = service.handle({"GET", "/schedule/\xff\xfe", {{"rank", "0"}}, ""});
  EXPECT_EQ(response.status, 404);
  EXPECT_FALSE(json::parse(response.body)["detail"].get<std::string>().empty());
}

TEST(ServedFrontier, FolderOfPlansKeepsParetoPointsFastestFirst) {
  const std::filesystem::path root = test_common::scratch_path("kareus_interop_served");
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  const workload::Workload workload = testing::test_workload(1, 4);
  // (time, energy): plan_0 (5, 2000), plan_1 (4, 3000), plan_2 (4.5, 3500) is dominated by plan_1.
  const double points[3][2] = {{5, 2000}, {4, 3000}, {4.5, 3500}};
  for (int index = 0; index < 3; ++index) {
    plan::Plan plan = testing::test_plan(workload, true, index);
    plan.predicted_time_s = points[index][0];
    plan.predicted_energy_j = points[index][1];
    plan::write_plan(root / fmt::format("plan_{}.json", index), plan);
  }
  const auto frontier = load_served_frontier(root);
  ASSERT_EQ(frontier.size(), 2u);
  EXPECT_EQ(frontier[0].time_s, 4);
  EXPECT_EQ(frontier[0].plan, plan::read_plan(root / "plan_1.json"));
  EXPECT_EQ(frontier[1].energy_j, 2000);
  // A frontier file wins over the plan files beside it.
  write_file_atomic(
      root / "frontier.json",
      R"({"schema": "kareus.frontier/1", "points": [{"time_s": 4.5, "energy_j": 3500, "plan": "plan_2.json"}]})");
  const auto from_file = load_served_frontier(root);
  ASSERT_EQ(from_file.size(), 1u);
  EXPECT_EQ(from_file[0].plan.stages[0].instructions[0].freq_mhz,
            testing::test_clock_mhz(0, Direction::kForward, 0, 2));
  // Plans of different shapes cannot be served together.
  std::filesystem::remove(root / "frontier.json");
  plan::Plan short_plan = testing::test_plan(testing::test_workload(1, 2), true, 0);
  short_plan.predicted_time_s = 3.5;  // the fastest, so it stays on the frontier
  short_plan.predicted_energy_j = 5000;
  plan::write_plan(root / "plan_3.json", short_plan);
  EXPECT_THAT(test_common::error_of([&] { (void)load_served_frontier(root); }), HasSubstr("4 microbatches"));
  EXPECT_THAT(test_common::error_of([&] { (void)load_served_frontier(root / "missing"); }),
              HasSubstr("no such file or folder"));
  std::filesystem::remove_all(root);
}

TEST(ServedFrontier, PlanOutputServesTheSummarysEmulatedFigures) {
  // OUT/summary.json + OUT/plans/kareus/plan_NN.json, as `kareus plan` writes them; the summary's
  // time_s/energy_j (emulated) differ from the plans' predicted figures and win.
  const std::filesystem::path out = test_common::scratch_path("kareus_interop_summary");
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out / "plans" / "kareus");
  const workload::Workload workload = testing::test_workload(1, 4);
  for (int index = 0; index < 2; ++index) {
    plan::write_plan(out / "plans" / "kareus" / fmt::format("plan_{:02d}.json", index),
                     testing::test_plan(workload, true, index));
  }
  write_file_atomic(out / "summary.json", R"({"schema": "kareus.summary/1", "methods": {"kareus": {"frontier": [
      {"time_s": 4.75, "energy_j": 21366.5, "plan": "plans/kareus/plan_00.json"},
      {"time_s": 4.85, "energy_j": 20864.0, "plan": "plans/kareus/plan_01.json"}]}}})");
  for (const std::filesystem::path& path :
       {out, out / "summary.json", out / "plans" / "kareus", std::filesystem::path(out.string() + "/plans/kareus/")}) {
    SCOPED_TRACE(path.string());
    const auto frontier = load_served_frontier(path);
    ASSERT_EQ(frontier.size(), 2u);
    EXPECT_EQ(frontier[0].time_s, 4.75);
    EXPECT_EQ(frontier[1].energy_j, 20864.0);
    EXPECT_EQ(frontier[1].plan, plan::read_plan(out / "plans" / "kareus" / "plan_01.json"));
  }
  EXPECT_EQ(test_common::error_of([&] { (void)load_served_frontier(out, "perseus"); }),
            (out / "summary.json").string() + ": no method 'perseus' (--method; the summary has kareus)");
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace kareus::interop
