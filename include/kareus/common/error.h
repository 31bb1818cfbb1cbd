// kareus/common/error.h - the two kinds of failure every module reports.
//
// InputError is the user's mistake (a bad flag, file, JSON or CSV): the CLI exits
// with 2. Error is everything else that went wrong (device, I/O, solver): exit 1.
// Messages are lower-case, name the flag, file or line, and give the numbers.
#pragma once

#include <stdexcept>
#include <string>

namespace kareus {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

class InputError : public Error {
 public:
  explicit InputError(const std::string& message) : Error(message) {}
};

}  // namespace kareus
