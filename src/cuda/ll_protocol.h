// The LL ("low latency") protocol, written once for the host and the GPU: data and a flag travel
// in the same word, so one store publishes both and the reader needs no fence and no separate
// flag. A 16-byte line carries 8 payload bytes as two {4 data bytes, 4 flag bytes} halves, as in
// NCCL: each half is one 8-byte store, so a reader that sees both flags current has the whole
// line, even where the line's two halves land separately (host stores, or a torn 16-byte store).
// The flag is the use's sequence number, never 0 and never repeated for 2^32 uses, so a buffer is
// reused without being cleared.
#pragma once
#include <cstddef>
#include <cstdint>

#include "src/common/host_device.h"

namespace weft::ll {

struct alignas(16) Line {
  uint64_t lo;  // payload bytes 0..3 | flag << 32
  uint64_t hi;  // payload bytes 4..7 | flag << 32
};
static_assert(sizeof(Line) == 16, "an LL line is 16 bytes");

inline constexpr size_t kPayloadBytes = 8;

// Lines that carry `bytes` of payload.
WEFT_HD_INLINE size_t linesFor(size_t bytes) { return (bytes + kPayloadBytes - 1) / kPayloadBytes; }

// Publishes `payload` with `flag` in one line.
WEFT_HD_INLINE void storeLine(Line* line, uint64_t payload, uint32_t flag) {
  const uint32_t d0 = static_cast<uint32_t>(payload), d1 = static_cast<uint32_t>(payload >> 32);
#if defined(__CUDA_ARCH__)
  asm volatile("st.volatile.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(line), "r"(d0), "r"(flag), "r"(d1),
               "r"(flag)
               : "memory");
#else
  __atomic_store_n(&line->lo, d0 | (uint64_t(flag) << 32), __ATOMIC_RELAXED);
  __atomic_store_n(&line->hi, d1 | (uint64_t(flag) << 32), __ATOMIC_RELAXED);
#endif
}

// Reads a line; true with its payload once both halves carry `flag`, false while either is stale.
WEFT_HD_INLINE bool loadLine(const Line* line, uint32_t flag, uint64_t* payload) {
  uint32_t d0, f0, d1, f1;
#if defined(__CUDA_ARCH__)
  asm volatile("ld.volatile.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
               : "l"(line)
               : "memory");
#else
  const uint64_t lo = __atomic_load_n(&line->lo, __ATOMIC_RELAXED);
  const uint64_t hi = __atomic_load_n(&line->hi, __ATOMIC_RELAXED);
  d0 = static_cast<uint32_t>(lo), f0 = static_cast<uint32_t>(lo >> 32);
  d1 = static_cast<uint32_t>(hi), f1 = static_cast<uint32_t>(hi >> 32);
#endif
  if (f0 != flag || f1 != flag) return false;
  *payload = d0 | (uint64_t(d1) << 32);
  return true;
}

// Payload line `index` of the message [src, src + bytes): 8 bytes little-endian, zero padded.
WEFT_HD_INLINE uint64_t packPayload(const unsigned char* src, size_t bytes, size_t index) {
  const size_t offset = index * kPayloadBytes;
  const size_t n = bytes - offset < kPayloadBytes ? bytes - offset : kPayloadBytes;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t(src[offset + i]) << (8 * i);
  return v;
}

// The inverse: writes line `index`'s share of the message to [dst, dst + bytes).
WEFT_HD_INLINE void unpackPayload(unsigned char* dst, size_t bytes, size_t index, uint64_t v) {
  const size_t offset = index * kPayloadBytes;
  const size_t n = bytes - offset < kPayloadBytes ? bytes - offset : kPayloadBytes;
  for (size_t i = 0; i < n; ++i) dst[offset + i] = static_cast<unsigned char>(v >> (8 * i));
}

// Publishes the lines first, first + stride, ... of a message (a GPU thread takes its own
// subset; the host writes them all with first 0, stride 1).
WEFT_HD_INLINE void write(Line* lines, const unsigned char* src, size_t bytes, uint32_t flag,
                          size_t first, size_t stride) {
  const size_t n = linesFor(bytes);
  for (size_t i = first; i < n; i += stride) storeLine(&lines[i], packPayload(src, bytes, i), flag);
}

}  // namespace weft::ll
