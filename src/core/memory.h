// ncclMemAlloc in host mode: page-aligned memory backed by a memfd, so peers on this host can
// map the same pages (zero-copy collectives on it).
#pragma once
#include <cstddef>

namespace weft::core {

void* memAlloc(size_t bytes);  // throws weft::Error
void memFree(void* ptr);       // throws weft::Error for pointers memAlloc did not return

struct SharedRegion {
  int fd = -1;
  size_t bytes = 0;
  void* base = nullptr;
};
// The memfd-backed region containing [ptr, ptr+bytes), if any.
bool findSharedRegion(const void* ptr, size_t bytes, SharedRegion* out);

}  // namespace weft::core
