// Shared by the tests of every module: the message of the InputError (or Error) an action throws.
#pragma once

#include <functional>
#include <string>
#include <type_traits>

#include "kareus/common/error.h"

namespace kareus::test_common {

/// The message of the `Exception` `action` throws (InputError by default; kareus::Error takes any
/// kareus error), or "<no InputError>" ("<no Error>") when it throws none.
template <typename Exception = InputError>
std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Exception& error) {
    return error.what();
  }
  return std::is_same_v<Exception, InputError> ? "<no InputError>" : "<no Error>";
}

}  // namespace kareus::test_common
