#include "kareus/plan/perseus_csv.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kareus/common/error.h"

namespace kareus::plan {
namespace {

std::string data(const std::string& name) { return std::string(KAREUS_TEST_DATA_DIR) + "/plan/perseus_csv/" + name; }

TEST(PerseusCsv, ReadsValidProfile) {
  const PerseusProfile profile = read_perseus_csv(data("valid.csv"), 2);
  ASSERT_EQ(profile.stages.size(), 2U);
  ASSERT_EQ(profile.stages[0].forward.size(), 2U);
  EXPECT_EQ(profile.stages[0].forward[1].freq_mhz, 1200);
  EXPECT_DOUBLE_EQ(profile.stages[0].forward[1].time_s, 0.012);
  EXPECT_DOUBLE_EQ(profile.stages[0].forward[1].energy_j, 2.6);
  EXPECT_EQ(profile.stages[0].backward.size(), 2U);
  EXPECT_EQ(profile.stages[1].forward.size(), 1U);
  EXPECT_DOUBLE_EQ(profile.stages[1].backward[0].energy_j, 6.3);
}

TEST(PerseusCsv, ToleratesCrlfAndSpaces) {
  const PerseusProfile profile = parse_perseus_csv(
      "stage,instruction,frequency,time,energy\r\n0, forward ,1410,0.5,2\r\n0,backward,1410,1,4\r\n", "x.csv", 1);
  EXPECT_DOUBLE_EQ(profile.stages[0].forward[0].time_s, 0.5);
}

struct FailureCase {
  std::string file;
  int stages;
  std::string expected;  // substring of the message, starting with file[:line]
};

TEST(PerseusCsv, EachFailureNamesFileAndLine) {
  const std::vector<FailureCase> cases = {
      {"short_line.csv", 1, "short_line.csv:3: expected 5 fields (stage,instruction,frequency,time,energy), found 4"},
      {"long_line.csv", 1, "long_line.csv:2: expected 5 fields (stage,instruction,frequency,time,energy), found 6"},
      {"non_numeric_time.csv", 1, "non_numeric_time.csv:3: time must be a number (seconds), found \"fast\""},
      {"negative_time.csv", 1, "negative_time.csv:2: time must be in (0, 1e+06] seconds, found -0.010"},
      {"negative_energy.csv", 1, "negative_energy.csv:3: energy must be in [0, 1e+12] joules, found -6.0"},
      {"missing_stage.csv", 2, "missing_stage.csv: no rows for stage 1 (--stages 2 needs stages 0..1)"},
      {"stage_out_of_range.csv", 2, "stage_out_of_range.csv:6: stage 2 is out of range for --stages 2 (expected 0..1)"},
      {"missing_backward.csv", 2, "missing_backward.csv: stage 1 has no backward rows"},
      {"missing_header.csv", 1,
       "missing_header.csv:1: expected the header \"stage,instruction,frequency,time,energy\""},
      {"bad_instruction.csv", 1,
       "bad_instruction.csv:3: instruction must be \"forward\" or \"backward\", found \"sideways\""},
      {"duplicate_row.csv", 1, "duplicate_row.csv:4: duplicate row for stage 0 forward at 1410 MHz (first on line 2)"},
  };
  for (const FailureCase& failure : cases) {
    SCOPED_TRACE(failure.file);
    try {
      (void)read_perseus_csv(data(failure.file), failure.stages);
      ADD_FAILURE() << "no error";
    } catch (const InputError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(failure.expected), std::string::npos) << message;
      EXPECT_EQ(message.find(data(failure.file)), 0U) << message;  // starts with the path
    }
  }
}

TEST(PerseusCsv, ValuesThatWouldMakeSumsNonFiniteNameTheLine) {
  // Two 1e308 s instructions sum to infinity: such a profile used to solve to "inf s, -nan J".
  const std::string header = "stage,instruction,frequency,time,energy\n";
  const auto error = [&](const std::string& rows) {
    try {
      (void)parse_perseus_csv(header + rows, "huge.csv", 1);
    } catch (const InputError& failure) {
      return std::string(failure.what());
    }
    return std::string("<no InputError>");
  };
  EXPECT_EQ(error("0,forward,1410,1e308,3\n0,backward,1410,1e308,6\n"),
            "huge.csv:2: time must be in (0, 1e+06] seconds, found 1e308");
  EXPECT_EQ(error("0,forward,1410,0.01,3\n0,backward,1410,0.02,1e300\n"),
            "huge.csv:3: energy must be in [0, 1e+12] joules, found 1e300");
  // The bounds themselves are accepted.
  EXPECT_EQ(error("0,forward,1410,1e6,1e12\n0,backward,1410,0.02,0\n"), "<no InputError>");
}

TEST(PerseusCsv, MissingFileAndBadStagesAreInputErrors) {
  EXPECT_THROW((void)read_perseus_csv(data("no_such_file.csv"), 1), InputError);
  EXPECT_THROW((void)read_perseus_csv(data("valid.csv"), 0), InputError);
  EXPECT_THROW((void)parse_perseus_csv("", "empty.csv", 1), InputError);
}

}  // namespace
}  // namespace kareus::plan
