// Shared by the tests of every parser: one valid document edited into many invalid ones, each
// with the piece of the InputError message it must give.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "input_error.h"

namespace kareus::test_common {

/// The first `from` of the valid document replaced by `to`; `message` is part of the error.
struct BadEdit {
  std::string from, to, message;
};

/// Each edit of `good` makes `parse` throw an InputError whose message contains the edit's.
inline void expect_each_edit_rejected(const std::string& good, const std::vector<BadEdit>& edits,
                                      const std::function<void(const std::string&)>& parse) {
  for (const BadEdit& edit : edits) {
    SCOPED_TRACE(edit.to);
    std::string text = good;
    const std::size_t at = text.find(edit.from);
    ASSERT_NE(at, std::string::npos) << edit.from;
    text.replace(at, edit.from.size(), edit.to);
    EXPECT_THAT(error_of([&] { parse(text); }), ::testing::HasSubstr(edit.message));
  }
}

}  // namespace kareus::test_common
