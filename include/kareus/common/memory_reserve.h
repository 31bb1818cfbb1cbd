// kareus/common/memory_reserve.h - out of memory ends a command with a message, never a core.
//
// When an allocation fails deep in a parse, the exception unwinds through nlohmann::json's
// destructor, which allocates (an explicit stack instead of recursion); a second failure there
// is an exception out of a destructor, std::terminate, SIGABRT and a core. A block kept aside at
// start and released at the first failure gives the unwinding room, so main's handler can say
// "out of memory" and exit 1.
#pragma once

#include <cstddef>

namespace kareus {

/// Sets `bytes` aside and installs a new-handler that, at the first allocation that fails,
/// releases them and throws std::bad_alloc (later failures throw it as usual). Call once, first
/// thing in main; a process that calls it gives up that much of its address space.
void reserve_memory_for_unwinding(std::size_t bytes = std::size_t{32} << 20);

}  // namespace kareus
