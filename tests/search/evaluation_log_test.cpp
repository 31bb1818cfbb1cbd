#include "kareus/search/evaluation_log.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/device/emulator.h"
#include "kareus/search/search.h"
#include "kareus/workload/model.h"

namespace kareus::search {
namespace {

namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  const fs::path directory = fs::temp_directory_path() / ("kareus_search_log_test_" + std::to_string(::getpid()));
  fs::create_directories(directory);
  const fs::path path = directory / name;
  fs::remove(path);
  return path;
}

LogHeader header(const std::string& key = "fwd_attn", std::uint64_t seed = 1) {
  return {R"({"model": "llama3.2-3b", "tp": 8})", key, 0, "emulator", "a100-40gb", seed};
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string expect_input_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const InputError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST(EvaluationLog, RoundTripsMeasurementsExactly) {
  const fs::path path = temp_path("roundtrip.jsonl");
  const Evaluation first{{1410, 12, "linear_0"}, 0.0123456789012345, 3.14159265358979};
  const Evaluation second{{900, 3, "norm_0"}, 1.0 / 3.0, 2.0 / 3.0};
  {
    EvaluationLog log(path, header());
    EXPECT_TRUE(log.recorded().empty());
    log.append(first);
    log.append(second);
  }
  EvaluationLog log(path, header());
  ASSERT_EQ(log.recorded().size(), 2u);
  EXPECT_EQ(log.recorded()[0].config, first.config);
  EXPECT_EQ(log.recorded()[0].time_s, first.time_s);  // bit-exact: the resumed search must not diverge
  EXPECT_EQ(log.recorded()[1].energy_j, second.energy_j);
  EXPECT_TRUE(log.find({900, 3, "norm_0"}).has_value());
  EXPECT_FALSE(log.find({900, 6, "norm_0"}).has_value());
  const nlohmann::json header_line = nlohmann::json::parse(lines_of(path).front());
  EXPECT_EQ(header_line["schema"], "kareus.evaluations/1");
  EXPECT_EQ(header_line["device"]["gpu"], "a100-40gb");
}

TEST(EvaluationLog, MismatchedHeaderNamesTheField) {
  const fs::path path = temp_path("mismatch.jsonl");
  { EvaluationLog log(path, header()); }
  struct Case {
    LogHeader other;
    std::string expected;
  };
  LogHeader gpu = header();
  gpu.gpu = "h100";
  LogHeader workload = header();
  workload.workload_json = R"({"model": "qwen3-1.7b", "tp": 8})";
  const std::vector<Case> cases = {{header("fwd_mlp"), "partition 'fwd_attn', not 'fwd_mlp'"},
                                   {header("fwd_attn", 2), "seed 1, not 2"},
                                   {gpu, "gpu 'a100-40gb', not 'h100'"},
                                   {workload, "the log is for workload"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    const std::string message = expect_input_error([&] { EvaluationLog log(path, c.other); });
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    EXPECT_NE(message.find("mismatch.jsonl:1"), std::string::npos) << message;
  }
}

TEST(EvaluationLog, CorruptLastLineIsReportedAndCutOff) {
  const fs::path path = temp_path("torn.jsonl");
  {
    EvaluationLog log(path, header());
    log.append({{1410, 12, "linear_0"}, 0.01, 3.0});
  }
  { std::ofstream(path, std::ios::app) << R"({"config": {"freq_mhz": 900, "ctas")"; }
  std::vector<std::string> warnings;
  {
    EvaluationLog log(path, header(), [&](const std::string& message) { warnings.push_back(message); });
    EXPECT_EQ(log.recorded().size(), 1u);
    log.append({{900, 3, "norm_0"}, 0.02, 2.0});
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("torn.jsonl:3"), std::string::npos) << warnings[0];
  EXPECT_EQ(lines_of(path).size(), 3u);  // header + 2 measurements, the fragment gone
  EvaluationLog reopened(path, header(), [&](const std::string& message) { warnings.push_back(message); });
  EXPECT_EQ(reopened.recorded().size(), 2u);
  EXPECT_EQ(warnings.size(), 1u);
}

TEST(EvaluationLog, CorruptMiddleLineIsAnInputErrorWithItsLine) {
  const fs::path path = temp_path("middle.jsonl");
  { EvaluationLog log(path, header()); }
  {
    std::ofstream out(path, std::ios::app);
    out << "not json\n"
        << R"({"config": {"freq_mhz": 900, "ctas": 3, "slot": "norm_0"}, "time_s": 1, "energy_j": 2})"
        << "\n";
  }
  const std::string message = expect_input_error([&] { EvaluationLog log(path, header()); });
  EXPECT_NE(message.find("middle.jsonl:2: corrupt line"), std::string::npos) << message;
  // A well-formed line with a bad field is an error too, naming the field.
  const fs::path negative = temp_path("negative.jsonl");
  { EvaluationLog log(negative, header()); }
  {
    std::ofstream out(negative, std::ios::app);
    out << R"({"config": {"freq_mhz": 900, "ctas": 3, "slot": "norm_0"}, "time_s": -1, "energy_j": 2})"
        << "\n"
        << R"({"config": {"freq_mhz": 930, "ctas": 3, "slot": "norm_0"}, "time_s": 1, "energy_j": 2})"
        << "\n";
  }
  const std::string field = expect_input_error([&] { EvaluationLog log(negative, header()); });
  EXPECT_NE(field.find("negative.jsonl:2"), std::string::npos) << field;
  EXPECT_NE(field.find("time_s"), std::string::npos) << field;
}

TEST(EvaluationLog, UnreadablePathIsAnInputError) {
  const fs::path directory = temp_path("a_directory");
  fs::create_directories(directory);
  const std::string message = expect_input_error([&] { EvaluationLog log(directory, header()); });
  EXPECT_NE(message.find("--log"), std::string::npos) << message;
  EXPECT_NE(message.find("a_directory"), std::string::npos) << message;
}

struct LogFixture {
  workload::Workload work = workload::make_workload(workload::load_model("llama3.2-3b"), {});
  device::GpuSpec gpu = device::load_gpu("a100-40gb");
  partition::Partition part = partition::representative_partition(work, "fwd_mlp");
  partition::SpaceOptions space_options{partition::SlotPolicy::kArtifact, {3, 30, 3}, {1, 20, 1}};
  partition::SearchSpace space = partition::make_search_space(part, device::artifact_clocks(gpu), space_options);

  SearchOptions options(const fs::path& log) const {
    SearchOptions result;
    result.budget = 40;
    result.seed = 3;
    result.log_path = log;
    result.workload_json = workload::workload_to_json(work);
    return result;
  }
};

// A device that kills its own process on the n-th measurement: a crash in the middle of a batch.
class KillingDevice final : public device::Device {
 public:
  KillingDevice(device::GpuSpec gpu, int kill_at) : inner_(std::move(gpu), {true, 3}), kill_at_(kill_at) {}
  const device::GpuSpec& gpu() const override { return inner_.gpu(); }
  std::string_view kind() const override { return inner_.kind(); }
  device::Measurement measure(const partition::Partition& partition, const partition::KnobConfig& config) override {
    if (++calls_ == kill_at_) ::kill(::getpid(), SIGKILL);
    return inner_.measure(partition, config);
  }

 private:
  device::EmulatedDevice inner_;
  int kill_at_;
  int calls_ = 0;
};

TEST(EvaluationLog, SearchResumesAfterSigkillWithoutLosingOrRepeatingAMeasurement) {
  const LogFixture f;
  const fs::path path = temp_path("killed.jsonl");
  const int kill_at = 24;  // inside a batch: the initial design is 10, then batches of 2
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    KillingDevice device(f.gpu, kill_at);
    (void)run_search(device, f.part, f.space, f.options(path));
    ::_exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(lines_of(path).size(), static_cast<std::size_t>(kill_at));  // header + 23 measurements

  device::EmulatedDevice device(f.gpu, {true, 3});
  const SearchResult resumed = run_search(device, f.part, f.space, f.options(path));
  EXPECT_EQ(resumed.from_log, static_cast<std::size_t>(kill_at - 1));
  const std::vector<std::string> lines = lines_of(path);
  EXPECT_EQ(lines.size(), resumed.evaluations.size() + 1);
  std::set<std::string> configs;
  for (std::size_t line = 1; line < lines.size(); ++line) {
    configs.insert(nlohmann::json::parse(lines[line])["config"].dump());
  }
  EXPECT_EQ(configs.size(), lines.size() - 1);  // each config exactly once

  // The same as a search that was never interrupted.
  device::EmulatedDevice fresh(f.gpu, {true, 3});
  SearchOptions uninterrupted = f.options(path);
  uninterrupted.log_path.reset();
  const SearchResult reference = run_search(fresh, f.part, f.space, uninterrupted);
  ASSERT_EQ(reference.evaluations.size(), resumed.evaluations.size());
  for (std::size_t index = 0; index < reference.evaluations.size(); ++index) {
    EXPECT_EQ(reference.evaluations[index].config, resumed.evaluations[index].config);
    EXPECT_EQ(reference.evaluations[index].time_s, resumed.evaluations[index].time_s);
  }

  // A third run takes everything from the log.
  device::EmulatedDevice again(f.gpu, {true, 3});
  const SearchResult replayed = run_search(again, f.part, f.space, f.options(path));
  EXPECT_EQ(replayed.from_log, replayed.evaluations.size());
  EXPECT_EQ(lines_of(path).size(), lines.size());
}

}  // namespace
}  // namespace kareus::search
