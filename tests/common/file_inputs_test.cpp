// Files in, outputs out (docs/limits.md): what a read refuses before it opens a path, what a
// lock file and a temporary never touch, and an output folder replaced whole or not at all.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/input_error.h"
#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/file_lock.h"
#include "kareus/common/output_folder.h"

namespace kareus {
namespace {

using test_common::error_of;
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / fmt::format("kareus_{}_{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The names in `dir`, sorted.
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// One whole run of a command into `out`: its files (name, content), then the commit.
void commit_run(const fs::path& out, std::string_view command, const std::map<std::string, std::string>& files) {
  OutputFolder folder(out, "--out", command);
  for (const auto& [name, content] : files) write(folder.staging() / name, content);
  // Nothing of this run is at DIR before the commit.
  EXPECT_FALSE(fs::exists(out / files.begin()->first) && read(out / files.begin()->first) == files.begin()->second);
  folder.commit();
}

// A pid that belonged to a process that has exited (and been reaped).
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST(ReadTextFile, AFifoIsRefusedWithoutBlocking) {
  const fs::path dir = fresh_dir("fifo");
  const fs::path fifo = dir / "plan.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Nobody writes the FIFO: opening it for reading would block for ever.
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of([&] { (void)read_text_file(fifo); }),
            fmt::format("cannot read {}: it is a FIFO, expected a regular file", fifo.string()));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(error_of([&] { (void)read_text_file("/dev/zero"); }),
            "cannot read /dev/zero: it is a character device, expected a regular file");
  EXPECT_EQ(error_of([&] { (void)read_text_file(dir); }),
            fmt::format("cannot read {}: it is a directory", dir.string()));
  write(dir / "ok.json", "{}\n");
  EXPECT_EQ(read_text_file(dir / "ok.json"), "{}\n");
  fs::remove_all(dir);
}

TEST(FileLock, NeverFollowsASymlinkNorTouchesAFileItDidNotCreate) {
  const fs::path dir = fresh_dir("lock_foreign");
  write(dir / "precious.txt", "a user's data\n");
  fs::create_symlink(dir / "precious.txt", dir / "out.lock");
  EXPECT_EQ(error_of([&] { const FileLock lock(dir / "out.lock", "--out out"); }),
            fmt::format("--out out: the lock file {} is a symbolic link; a lock never follows one (remove it)",
                        (dir / "out.lock").string()));
  EXPECT_EQ(read(dir / "precious.txt"), "a user's data\n");  // not truncated to a pid
  EXPECT_TRUE(fs::is_symlink(dir / "out.lock"));             // not removed either
  // A file at the lock's path that holds no pid is someone's: refused, left as it was.
  write(dir / "log.jsonl.lock", "notes about the log\n");
  EXPECT_EQ(error_of([&] { const FileLock lock(dir / "log.jsonl.lock", "--log log.jsonl"); }),
            fmt::format("--log log.jsonl: {} exists and is not a kareus lock file (a pid); it is left alone: remove it "
                        "or choose another path",
                        (dir / "log.jsonl.lock").string()));
  EXPECT_EQ(read(dir / "log.jsonl.lock"), "notes about the log\n");
  // A lock file an earlier kareus process left (its pid) is taken over.
  write(dir / "stale.lock", "4242\n");
  {
    const FileLock lock(dir / "stale.lock", "--out stale");
    EXPECT_EQ(read(dir / "stale.lock"), fmt::format("{}\n", ::getpid()));
  }
  EXPECT_FALSE(fs::exists(dir / "stale.lock"));
  fs::remove_all(dir);
}

TEST(WriteFileAtomic, RemovesOnlyDeadProcessesTemporaries) {
  const fs::path dir = fresh_dir("temporaries");
  const fs::path dead = dir / fmt::format("summary.json.{}-0.tmp", dead_pid());
  const fs::path live = dir / fmt::format("summary.json.{}-7.tmp", ::getppid());  // our parent is alive
  const fs::path other = dir / "summary.json.notes.tmp";                          // not a kareus temporary
  for (const fs::path& path : {dead, live, other}) write(path, "partial");
  write_file_atomic(dir / "summary.json", "{}\n");
  EXPECT_EQ(read(dir / "summary.json"), "{}\n");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
  fs::remove_all(dir);
}

TEST(WriteFileAtomic, UnderADeferredSyncFolderWritesWithoutSweepingUntilTheScopeEnds) {
  const fs::path dir = fresh_dir("deferred");
  const fs::path staging = dir / "staging";
  fs::create_directory(staging);
  const fs::path dead = staging / fmt::format("plan.json.{}-0.tmp", dead_pid());
  write(dead, "partial");
  {
    const DeferredSync deferred(staging);
    write_file_atomic(staging / "plan.json", "{\"a\": 1}\n");
    write_file_atomic(staging / "plan.json", "{\"a\": 2}\n");  // rewritten whole
    EXPECT_EQ(read(staging / "plan.json"), "{\"a\": 2}\n");
    EXPECT_TRUE(fs::exists(dead));  // the folder is taken as this process's own: no sweep
    // A folder beside it is not covered, though its name starts the same.
    write(dir / fmt::format("staging2.json.{}-0.tmp", dead_pid()), "partial");
    write_file_atomic(dir / "staging2.json", "{}\n");
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);  // staging, staging2.json
    sync_file_system(staging);
  }
  write_file_atomic(staging / "plan.json", "{}\n");  // the scope ended: swept again
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_EQ(std::distance(fs::directory_iterator(staging), fs::directory_iterator()), 1);
  try {
    sync_file_system(dir / "missing");
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              fmt::format("cannot flush {} to disk: No such file or directory", (dir / "missing").string()));
  }
  fs::remove_all(dir);
}

TEST(OutputFolder, ReplacesTheFolderWholeOnCommit) {
  const fs::path dir = fresh_dir("output_commit");
  const fs::path out = dir / "plan";
  commit_run(out, "kareus plan", {{"summary.json", "one"}, {"extra.json", "only in the first run"}});
  EXPECT_EQ(read(out / "summary.json"), "one");
  EXPECT_EQ(read(out / std::string(kOutputMarker)), "kareus plan\n");
  commit_run(out, "kareus plan", {{"summary.json", "two"}});  // "one" stays until the commit
  EXPECT_EQ(read(out / "summary.json"), "two");
  EXPECT_FALSE(fs::exists(out / "extra.json"));               // replaced whole: nothing of the first run is left
  EXPECT_EQ(entries(dir), std::vector<std::string>{"plan"});  // no temporary, no lock left behind
  fs::remove_all(dir);
}

TEST(OutputFolder, AFailedRunLeavesThePreviousOutputExactlyAsItWas) {
  const fs::path dir = fresh_dir("output_fail");
  const fs::path out = dir / "solve";
  commit_run(out, "kareus solve", {{"frontier.json", "good"}});
  try {
    OutputFolder second(out, "--out", "kareus solve");
    write(second.staging() / "frontier.json", "half");
    throw InputError("bad profile");  // the run fails before its commit
  } catch (const InputError&) {
  }
  EXPECT_EQ(read(out / "frontier.json"), "good");
  EXPECT_EQ(entries(dir), std::vector<std::string>{"solve"});  // the staging folder is gone
  // A killed run's staging folder (its pid is dead) is removed by the next run into DIR.
  const fs::path killed = dir / fmt::format("solve.{}-3.tmp", dead_pid());
  fs::create_directories(killed / "plans");
  {
    const OutputFolder third(out, "--out", "kareus solve");
    EXPECT_FALSE(fs::exists(killed));
  }
  EXPECT_EQ(read(out / "frontier.json"), "good");
  fs::remove_all(dir);
}

TEST(OutputFolder, RefusesAFolderKareusDidNotWriteAndInputsInsideIt) {
  const fs::path dir = fresh_dir("output_foreign");
  write(dir / "notes.txt", "a user's file");
  EXPECT_EQ(error_of([&] { const OutputFolder out(dir, "--out", "kareus export"); }),
            fmt::format("--out {}: exists and is not a kareus output folder (no .kareus-output); it would be "
                        "replaced whole, so give a new folder or empty it",
                        dir.string()));
  EXPECT_EQ(read(dir / "notes.txt"), "a user's file");
  const OutputFolder out(dir / "solve", "--out", "kareus solve");
  EXPECT_EQ(error_of([&] { out.check_input_outside(dir / "solve" / "profile.csv", "--profile"); }),
            fmt::format("--profile {} lies inside --out {}, which is replaced whole: move it out or write elsewhere",
                        (dir / "solve" / "profile.csv").string(), (dir / "solve").string()));
  out.check_input_outside(dir / "solve_profile.csv", "--profile");  // a sibling with a common prefix is fine
  // A second writer of the same folder is refused while the first holds it.
  EXPECT_EQ(error_of([&] { const OutputFolder second(dir / "solve", "--out", "kareus solve"); }),
            fmt::format("--out {}: in use by another kareus process (pid {}, lock {}.lock)", (dir / "solve").string(),
                        ::getpid(), (dir / "solve").string()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kareus
