// The fake stream driver's device memory (fake_stream_driver.cc, fake_stream_context.cc): shared
// memory, one memfd per allocation, so that another process can map it as CUDA IPC maps a
// peer's cudaMalloc memory. Allocations are found by any address inside them.
#pragma once
#include <cstddef>
#include <cstdint>

namespace weft::fake {

struct Allocation {
  uintptr_t base = 0;
  size_t bytes = 0;
  uint64_t id = 0;  // unique in this process (CU_POINTER_ATTRIBUTE_BUFFER_ID)
  int fd = -1;      // the memfd behind it; -1 for a peer's allocation mapped here
  bool imported = false;
  int device = 0;  // the GPU whose context was current when it was made
};

// A new zero-filled allocation of at least `bytes` (page-aligned) on the current context's GPU,
// or null.
void* allocateDevice(size_t bytes);
// The GPU of the context current on this thread (fake_stream_context.cc).
int currentDevice();
// Frees an allocation made here (false: not one).
bool freeDevice(void* base);
// The allocation holding `address`, if any.
bool findDevice(uintptr_t address, Allocation* out);
// Maps a peer process's allocation (its pid and memfd number) here; null on failure.
void* importDevice(int pid, int fd, size_t bytes);
// Unmaps an imported allocation (false: not one).
bool closeImported(void* base);

}  // namespace weft::fake
