// kareus/common/version.h - the kareus version, printed by --version and written into logs.
#pragma once

#include <string_view>

namespace kareus {

inline constexpr std::string_view kKareusVersion = "0.1.0";

}  // namespace kareus
