// Shared by the tests of every module: a path in the temporary folder that no other test process
// uses, so two runs of the suite side by side (or a test and its rerun) never share a file.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace kareus::test_common {

/// TMPDIR/<stem>.<pid><extension> of `name` ("results.jsonl" -> "results.4242.jsonl"): each test
/// runs in a process of its own (gtest_discover_tests), so the process id tells runs apart and
/// the extension a reader may look at stays.
inline std::filesystem::path scratch_path(const std::string& name) {
  const std::filesystem::path path(name);
  return std::filesystem::temp_directory_path() /
         (path.stem().string() + "." + std::to_string(::getpid()) + path.extension().string());
}

}  // namespace kareus::test_common
