// Reduction and copy kernels over host memory: SIMD (AVX-512 / AVX2 picked at run time) with a
// scalar fallback. fp16 / bf16 / fp8 are computed in fp32 per operation and rounded to nearest
// even, like NCCL's device code; fp8 conversions saturate to the largest finite value (satfinite).
#pragma once
#include <cstddef>

#include "src/common/datatype.h"

namespace weft {

// How a kernel writes its destination: kCached with plain stores; kStreaming with non-temporal
// stores that skip the read-for-ownership (a third of a copy's memory traffic), for large results
// nobody rereads soon. Streaming falls back to plain stores where dst aliases an input, is
// misaligned for the type, or the CPU has no vector stores.
enum class Store { kCached, kStreaming };

// dst[i] = A(a[i]) op B(b[i]), where A(x) = x * scalar when scaleA is set (PreMulSum), else x.
// op is Sum, Prod, Max, Min or PreMulSum (PreMulSum reduces with Sum). dst may alias a or b.
void reduce(DataType t, RedOp op, void* dst, const void* a, bool scaleA, const void* b, bool scaleB,
            size_t count, const Scalar* scalar, Store store = Store::kCached);

// reduce() that stores every result at both dst and dst2 in one pass over a and b (this rank's
// output and a peer's, say). dst2 must not overlap dst, a or b.
void reduceTwice(DataType t, RedOp op, void* dst, void* dst2, const void* a, bool scaleA,
                 const void* b, bool scaleB, size_t count, const Scalar* scalar,
                 Store store = Store::kCached);

// dst[i] = scalar ? src[i] * *scalar : src[i]; plain memcpy when scalar is null. dst == src
// allowed.
void copyElements(DataType t, void* dst, const void* src, size_t count, const Scalar* scalar,
                  Store store = Store::kCached);

// buf[i] /= divisor, for Avg on integer types (rounds toward zero like C division).
void divideElements(DataType t, void* buf, size_t count, uint64_t divisor);

// Builds the Scalar 1/n in type t (for Avg on floating types).
Scalar reciprocalScalar(DataType t, int n);

// Conversions used by kernels and tests.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);
float fp8e4m3ToFloat(uint8_t v);
uint8_t floatToFp8e4m3(float f);
float fp8e5m2ToFloat(uint8_t v);
uint8_t floatToFp8e5m2(float f);

// Name of the kernel family chosen at run time: "avx512", "avx2" or "scalar" (WEFT_SIMD may force
// one).
const char* simdLevel();

}  // namespace weft
