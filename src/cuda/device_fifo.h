// One direction of a link between two ranks for the device interpreter: a ring of slots, the
// sender's posted counter and the receiver's consumed counter, plus the size of the message in
// each slot (which lets the receiver catch mismatched calls). All of it is plain memory that
// both ranks reach: host memory for the host tests, device memory for ranks sharing a GPU, and
// (later) IPC-mapped device memory between processes. The counters only grow, so one FIFO serves
// run after run without being cleared; it must be zeroed once before its first use.
//
// Memory layout of one FIFO (fifoBytes() in all): the posted counter, the consumed counter (each
// on its own 128-byte line so the two ends do not share a line), the per-slot sizes, the slots.
#pragma once
#include <cstddef>
#include <cstdint>

#include "src/common/host_device.h"

namespace weft::cuda {

inline constexpr size_t kFifoLine = 128;

// A view of one FIFO's memory, as one rank sees it (each process maps the memory at its own
// address and makes its own view with fifoAt()).
struct DeviceFifo {
  uint64_t* posted = nullptr;    // messages the sender has posted (written by the sender only)
  uint64_t* consumed = nullptr;  // messages the receiver has released (receiver only)
  uint32_t* sizes = nullptr;     // bytes of the message in each slot
  char* slots = nullptr;         // slotCount slots of slotBytes each
  uint32_t slotCount = 0;
  uint32_t slotBytes = 0;
};

WEFT_HD_INLINE size_t fifoSizesBytes(uint32_t slotCount) {
  return (slotCount * sizeof(uint32_t) + kFifoLine - 1) / kFifoLine * kFifoLine;
}

// Bytes of memory a FIFO of `slotCount` slots of `slotBytes` takes (slotBytes rounded up to 16).
WEFT_HD_INLINE size_t fifoBytes(uint32_t slotCount, uint32_t slotBytes) {
  const size_t slot = (slotBytes + 15u) / 16u * 16u;
  return 2 * kFifoLine + fifoSizesBytes(slotCount) + size_t{slotCount} * slot;
}

// The view of FIFO memory at `mem` (kFifoLine-aligned, fifoBytes() long, zeroed before first use).
WEFT_HD_INLINE DeviceFifo fifoAt(void* mem, uint32_t slotCount, uint32_t slotBytes) {
  char* base = static_cast<char*>(mem);
  DeviceFifo f;
  f.posted = reinterpret_cast<uint64_t*>(base);
  f.consumed = reinterpret_cast<uint64_t*>(base + kFifoLine);
  f.sizes = reinterpret_cast<uint32_t*>(base + 2 * kFifoLine);
  f.slots = base + 2 * kFifoLine + fifoSizesBytes(slotCount);
  f.slotCount = slotCount;
  f.slotBytes = (slotBytes + 15u) / 16u * 16u;
  return f;
}

// Where slot `index` (a message number) starts.
WEFT_HD_INLINE char* fifoSlot(const DeviceFifo& f, uint64_t index) {
  return f.slots + (index % f.slotCount) * size_t{f.slotBytes};
}

}  // namespace weft::cuda
