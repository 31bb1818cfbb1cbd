// Frontier files: the writer (frontier_to_json) and the reader (read_frontier) round trip, and
// the reader's plan paths and refusals; a summary's method frontier (read_summary_frontier).
#include "kareus/plan/frontier.h"

#include <stdlib.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "kareus/common/error.h"

namespace kareus::plan {
namespace {

// A fresh folder of this test's own (mkdtemp), so parallel runs never share a file.
std::filesystem::path scratch_folder() {
  std::string pattern = (std::filesystem::temp_directory_path() / "kareus_frontier_test.XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

TEST(Frontier, WrittenPointsReadBackWithPlanPathsBesideTheFile) {
  const std::filesystem::path directory = scratch_folder();
  const std::vector<FrontierPoint> written = {{1.25, 900.5, "plans/p0.json"}, {2.0, 800, "/abs/p1.json"}};
  const std::filesystem::path path = directory / "frontier.json";
  std::ofstream(path) << frontier_to_json(written);
  const std::vector<FrontierPoint> read = read_frontier(path);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0], (FrontierPoint{1.25, 900.5, (directory / "plans/p0.json").string()}));
  EXPECT_EQ(read[1], (FrontierPoint{2.0, 800, "/abs/p1.json"}));
  std::filesystem::remove_all(directory);
}

TEST(Frontier, ReaderRefusesBadPointsNamingThem) {
  const auto message_of = [](const std::string& text) {
    try {
      (void)parse_frontier(text, "out/frontier.json");
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of(R"({"schema": "kareus.frontier/1", "points": [{"time_s": 0, "energy_j": 1, "plan": "x"}]})"),
            "out/frontier.json: points[0]: field 'time_s' must be > 0, found 0");
  EXPECT_EQ(message_of(R"({"schema": "kareus.frontier/2", "points": []})"),
            "out/frontier.json: schema must be \"kareus.frontier/1\", found \"kareus.frontier/2\"");
  EXPECT_EQ(message_of(R"({"schema": "kareus.frontier/1", "points": []})"),
            "out/frontier.json: 'points' must be a non-empty array");
}

TEST(SummaryFrontier, ReadsOneMethodsPointsWithPlanPathsBesideTheSummary) {
  const std::filesystem::path directory = scratch_folder();
  const std::filesystem::path path = directory / "summary.json";
  std::ofstream(path) << R"({"schema": "kareus.summary/1", "methods": {
    "perseus": {"frontier": [{"time_s": 5.2, "energy_j": 21800, "plan": "plans/perseus/plan_00.json"}]},
    "kareus": {"frontier": [{"time_s": 4.5, "energy_j": 21400, "plan": "plans/kareus/plan_00.json",
                             "predicted_time_s": 4.49, "solved_by": "kareus"},
                            {"time_s": 6.0, "energy_j": 19000.5, "plan": "/abs/plan_01.json"}]}}})";
  const std::vector<FrontierPoint> read = read_summary_frontier(path, "kareus");
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0], (FrontierPoint{4.5, 21400, (directory / "plans/kareus/plan_00.json").string()}));
  EXPECT_EQ(read[1], (FrontierPoint{6.0, 19000.5, "/abs/plan_01.json"}));
  const auto message_of = [&](const std::string& method) {
    try {
      (void)read_summary_frontier(path, method);
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of("megatron"),
            path.string() + ": no method 'megatron' (--method; the summary has kareus, perseus)");
  std::ofstream(path) << R"({"schema": "kareus.summary/1", "methods": {"kareus": {"frontier": [
    {"time_s": 4.5, "energy_j": -1, "plan": "p.json"}]}}})";
  EXPECT_EQ(message_of("kareus"),
            path.string() + ": methods.kareus.frontier[0]: field 'energy_j' must be >= 0, found -1");
  std::ofstream(path) << R"({"schema": "kareus.summary/1", "methods": {"kareus": {"frontier": []}}})";
  EXPECT_EQ(message_of("kareus"), path.string() + ": 'methods.kareus.frontier' must be a non-empty array");
  std::ofstream(path) << R"({"schema": "kareus.frontier/1", "points": []})";
  EXPECT_EQ(message_of("kareus"), path.string() + ": schema must be \"kareus.summary/1\", found \"kareus.frontier/1\"");
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace kareus::plan
