// ncclMemAlloc in host mode: page-aligned memory backed by a memfd, so peers on this host can
// map the same pages (zero-copy collectives on it).
#pragma once
#include <cstddef>

namespace weft::core {

void* memAlloc(size_t bytes);  // throws weft::Error
void memFree(void* ptr);       // throws weft::Error for pointers memAlloc did not return

}  // namespace weft::core
