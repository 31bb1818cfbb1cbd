// The one JSONL writer of the measurement logs: whole lines or nothing, torn tails cut and
// reported, never glued to the next record.
#include "kareus/common/jsonl_log.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/input_error.h"
#include "kareus/common/error.h"

namespace kareus {
namespace {

namespace fs = std::filesystem;

fs::path fresh_file(const std::string& name, const std::string& content) {
  const auto path = fs::temp_directory_path() / fmt::format("kareus_{}_{}.jsonl", name, ::getpid());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  return path;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(JsonlAppender, ATornLastLineIsCutAndReportedNotGluedToTheNextRecord) {
  const fs::path path = fresh_file("torn", "{\"a\": 1}\n{\"b\": 2}\n{\"c\": 3, \"d\"");
  std::vector<std::string> warnings;
  {
    JsonlAppender log(path, "--log l", [&](const std::string& message) { warnings.push_back(message); });
    EXPECT_EQ(log.existing(), "{\"a\": 1}\n{\"b\": 2}\n");
    log.append("{\"e\": 5}");
  }
  EXPECT_EQ(read(path), "{\"a\": 1}\n{\"b\": 2}\n{\"e\": 5}\n");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], fmt::format("{}:3: a torn last line (a write cut short by a crash or a full disk), 12 bytes: "
                                     "\"{{\"c\": 3, \"d\"\"; cut off",
                                     path.string()));
  // A whole record that only lost its newline is kept and terminated.
  std::ofstream(path, std::ios::binary | std::ios::app) << "{\"f\": 6}";
  { JsonlAppender log(path, "--log l"); }
  EXPECT_EQ(read(path), "{\"a\": 1}\n{\"b\": 2}\n{\"e\": 5}\n{\"f\": 6}\n");
  fs::remove(path);
}

TEST(JsonlAppender, AWriteCutShortByAFullDiskLeavesNoFragment) {
  const std::string before = "{\"header\": true}\n{\"time_s\": 1}\n";
  const fs::path path = fresh_file("full", before);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The file may grow 10 more bytes: the next 40-byte line is cut short (EFBIG, as ENOSPC).
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{before.size() + 10, before.size() + 10};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int code = 3;
    try {
      JsonlAppender log(path, "--log l");
      log.append(R"({"time_s": 2, "energy_j": 300, "pad": 0})");
    } catch (const Error&) {
      code = 0;  // refused, as it must be
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read(path), before);  // whole lines only: the 10 bytes that got out were cut back
  {
    JsonlAppender log(path, "--log l");
    log.append(R"({"time_s": 3})");
  }
  EXPECT_EQ(read(path), before + "{\"time_s\": 3}\n");
  fs::remove(path);
}

TEST(JsonlAppender, RefusesWhatIsNotARegularFileAndASecondWriter) {
  const fs::path path = fresh_file("second", "");
  const JsonlAppender first(path, "--log l");
  EXPECT_EQ(test_common::error_of([&] { const JsonlAppender second(path, "--log l"); }),
            fmt::format("--log l: in use by another kareus process (pid {}, lock {}.lock)", ::getpid(), path.string()));
  const fs::path fifo = path.string() + ".fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(test_common::error_of([&] { const JsonlAppender log(fifo, "--out f"); }),
            "--out f: cannot open the log: not a regular file");
  fs::remove(fifo);
  fs::remove(path);
}

TEST(ForEachJsonlLine, ReadsWholeLinesAndReportsATornTail) {
  std::vector<std::pair<int, std::string>> lines;
  std::vector<std::string> warnings;
  for_each_jsonl_line(
      "{\"a\": 1}\n\n{\"b\": 2}\n{\"c\"", "m.jsonl",
      [&](std::string_view line, int number) { lines.emplace_back(number, std::string(line)); },
      [&](const std::string& message) { warnings.push_back(message); });
  const std::vector<std::pair<int, std::string>> expected = {{1, "{\"a\": 1}"}, {2, ""}, {3, "{\"b\": 2}"}};
  EXPECT_EQ(lines, expected);
  EXPECT_EQ(warnings, std::vector<std::string>{"m.jsonl:4: a torn last line (a write cut short by a crash or a full "
                                               "disk), 4 bytes: \"{\"c\"\"; skipped"});
}

}  // namespace
}  // namespace kareus
