// Two processes on one output: the advisory lock and the per-process temporary names.
#include "kareus/common/file_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/input_error.h"
#include "kareus/common/error.h"
#include "kareus/common/file_io.h"

namespace kareus {
namespace {

using test_common::error_of;

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("kareus_{}_{}", name, ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(FileLock, ASecondProcessIsRefusedWithTheHoldersPid) {
  const auto dir = fresh_dir("lock");
  const auto lock_path = dir / "out.lock";
  int ready[2];
  int release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the holder: lock, say so, wait to be told to let go
    {
      const FileLock lock(lock_path, "--out child");
      char byte = 1;
      (void)!::write(ready[1], &byte, 1);
      (void)!::read(release[0], &byte, 1);
    }
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  EXPECT_EQ(error_of([&] { const FileLock second(lock_path, "--out DIR"); }),
            fmt::format("--out DIR: in use by another kareus process (pid {}, lock {})", child, lock_path.string()));
  ASSERT_EQ(::write(release[1], &byte, 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(std::filesystem::exists(lock_path));  // removed on release
  {
    const FileLock again(lock_path, "--out DIR");  // free again
    EXPECT_EQ(read_text_file(lock_path), fmt::format("{}\n", ::getpid()));
  }
  // Two locks in one process conflict too (each open file is its own holder).
  const FileLock first(lock_path, "first");
  EXPECT_NE(error_of([&] { const FileLock second(lock_path, "second"); }).find("second: in use"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(FileLock, ADeadHoldersLockIsFree) {
  const auto dir = fresh_dir("dead_lock");
  const auto lock_path = dir / "out.lock";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    (void)new FileLock(lock_path, "leaked");  // never released: the process dies holding it
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(std::filesystem::exists(lock_path));  // the file stays, the lock does not
  EXPECT_NO_THROW({ const FileLock lock(lock_path, "after"); });
  std::filesystem::remove_all(dir);
}

TEST(WriteFileAtomic, ConcurrentWritersEachRenameACompleteFile) {
  const auto dir = fresh_dir("atomic");
  const auto path = dir / "summary.json";
  // Four processes write one path 200 times each, with contents of different sizes: every read
  // sees one writer's whole content, no write fails, and no temporary is left behind.
  std::vector<pid_t> children;
  for (int writer = 0; writer < 4; ++writer) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const std::string content(1000 * (writer + 1), static_cast<char>('a' + writer));
      try {
        for (int round = 0; round < 200; ++round) write_file_atomic(path, content);
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  const std::string content = read_text_file(path);
  ASSERT_FALSE(content.empty());
  const int writer = content[0] - 'a';
  EXPECT_EQ(content, std::string(1000 * (writer + 1), content[0]));
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(dir);
}

TEST(ReadTextFile, ADirectoryIsNamedAsOne) {
  const auto dir = fresh_dir("read_dir");
  EXPECT_EQ(error_of([&] { (void)read_text_file(dir); }),
            fmt::format("cannot read {}: it is a directory", dir.string()));
  std::filesystem::remove_all(dir);
}

TEST(CheckWritableFile, RefusesADirectoryAndAMissingFolder) {
  const auto dir = fresh_dir("writable");
  EXPECT_EQ(error_of([&] { check_writable_file(dir, "--out"); }),
            fmt::format("--out {}: is a directory, expected a file path", dir.string()));
  EXPECT_EQ(
      error_of([&] { check_writable_file(dir / "no" / "x.json", "--out"); }),
      fmt::format("--out {}: the folder {} does not exist", (dir / "no" / "x.json").string(), (dir / "no").string()));
  EXPECT_NO_THROW(check_writable_file(dir / "x.json", "--out"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kareus
