// Shared by the tests of every module: the message of the InputError an action throws.
#pragma once

#include <functional>
#include <string>

#include "kareus/common/error.h"

namespace kareus::test_common {

/// The InputError's message, or "<no InputError>" when `action` does not throw one.
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const InputError& error) {
    return error.what();
  }
  return "<no InputError>";
}

}  // namespace kareus::test_common
