// ncclMemAlloc's host memory: page-aligned memory backed by a memfd, so peers on this host can map
// the same pages (zero-copy collectives on it). Device memory is src/cuda/memory.h's.
#pragma once
#include <cstddef>

namespace weft::core {

// Throws weft::Error where the memory cannot be had (the message names the call).
void* hostMemAlloc(size_t bytes);
// Frees memory hostMemAlloc returned; false (nothing done) for any other pointer.
bool hostMemFree(void* ptr);

}  // namespace weft::core
