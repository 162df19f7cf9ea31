// Internals of the reduction kernels: the per-ISA entry points and test hooks.
//
// reduce_avx2.cc and reduce_avx512.cc are compiled with their own -m flags, so they may only be
// entered after a CPU check, and they must not instantiate inline functions or templates that other
// files share (the linker could keep their AVX copy for everyone). They therefore include nothing
// but this header, <immintrin.h> and C headers, keep everything in an unnamed namespace, and hand
// the leftover tail elements back to the portable scalar code.
#pragma once
#include <cstddef>

#include "src/common/datatype.h"
#include "src/common/reduce.h"

namespace weft::kernels {

enum class SimdLevel : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

const char* simdLevelName(SimdLevel level);

// Best level this CPU (and this build) supports.
SimdLevel cpuSimdLevel();

// Level reduce() and copyElements() use: cpuSimdLevel(), lowered by WEFT_SIMD. Fixed at first use.
SimdLevel activeSimdLevel();

// What one element-wise call does. scaleA / scaleB point at the PreMulSum scalar's bytes (an
// element of `type`) when that operand is scaled, else null. op is never kAvg or kPreMulSum here.
struct ReduceArgs {
  DataType type;
  RedOp op;
  void* dst;
  const void* a;
  const void* b;
  const void* scaleA;
  const void* scaleB;
  size_t count;
  bool stream;  // non-temporal stores; set only when dst is 64-byte aligned and aliases no input
  // A second destination written with the same values (reduceTwice), or null. Set only without
  // scales, with dst2 as aligned as dst and overlapping nothing; kernels that cannot return 0.
  void* dst2 = nullptr;
};

// The portable scalar kernels (reduce_scalar.cc): all of the work at SimdLevel::kScalar, and
// what the vector bodies below leave at the other levels. reduceScalar writes dst only (it
// ignores dst2 and stream); scaleScalar is dst[i] = src[i] * *scalar for every type.
void reduceScalar(const ReduceArgs& args);
void scaleScalar(DataType type, void* dst, const void* src, const void* scalar, size_t count);

// Vector bodies: each handles a prefix of the elements (a multiple of its vector width) and
// returns how many it did; 0 means the case has no vector code. The caller finishes the rest.
size_t reduceAvx2(const ReduceArgs& args);
size_t reduceAvx512(const ReduceArgs& args);
// dst[i] = src[i] * *scalar for the floating types with vector code; same return convention.
size_t scaleAvx2(DataType type, void* dst, const void* src, const void* scalar, size_t count);
size_t scaleAvx512(DataType type, void* dst, const void* src, const void* scalar, size_t count);

// Copies a prefix of whole 64-byte lines with non-temporal stores (dst 64-byte aligned) and
// fences; returns the bytes done. The caller copies the rest.
size_t streamCopyAvx2(void* dst, const void* src, size_t bytes);

// Out-of-place reductions whose output is at least this large bypass the cache with non-temporal
// stores: the start of such an output is evicted before the end is written, so nobody rereads it
// from cache, and skipping the read-for-ownership saves a third of the traffic. Test hook to lower.
size_t streamMinBytes();
void setStreamMinBytes(size_t bytes);

// reduce() / copyElements() with a given level's kernels (test hook; the CPU must support it).
void reduceWith(SimdLevel level, DataType t, RedOp op, void* dst, const void* a, bool scaleA,
                const void* b, bool scaleB, size_t count, const Scalar* scalar,
                Store store = Store::kCached);
void reduceTwiceWith(SimdLevel level, DataType t, RedOp op, void* dst, void* dst2, const void* a,
                     bool scaleA, const void* b, bool scaleB, size_t count, const Scalar* scalar,
                     Store store = Store::kCached);
void copyElementsWith(SimdLevel level, DataType t, void* dst, const void* src, size_t count,
                      const Scalar* scalar, Store store = Store::kCached);

}  // namespace weft::kernels
