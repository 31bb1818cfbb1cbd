#include "kareus/common/memory_reserve.h"

#include <atomic>
#include <new>

namespace kareus {
namespace {

std::atomic<char*> reserve{nullptr};

// Runs when operator new cannot allocate: free the reserve for the unwinding, and fail this
// allocation (retrying it could succeed and leave the next failure without any room).
void release_reserve_and_fail() {
  delete[] reserve.exchange(nullptr);
  std::set_new_handler(nullptr);
  throw std::bad_alloc();
}

}  // namespace

void reserve_memory_for_unwinding(std::size_t bytes) {
  delete[] reserve.exchange(new char[bytes]);
  std::set_new_handler(release_reserve_and_fail);
}

}  // namespace kareus
