// AVX2 kernels (with FMA and F16C present, though FMA is never used: a*s+b must round twice to
// match the scalar code). Built with -mavx2 -mfma -mf16c and entered only after a CPU check; see
// reduce_internal.h for why everything here stays in an unnamed namespace.
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "src/common/reduce_internal.h"

namespace weft::kernels {
namespace {

// Float max / min with the scalar code's NaN rule: maxps returns its second operand when either
// is NaN, so patch the lanes where b is NaN back to a.
inline __m256 maxF32(__m256 a, __m256 b) {
  return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
}
inline __m256 minF32(__m256 a, __m256 b) {
  return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
}

// Ops shared by the formats that compute in fp32 lanes.
struct FloatLanes {
  using V = __m256;
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V max(V a, V b) { return maxF32(a, b); }
  static V min(V a, V b) { return minF32(a, b); }
};

struct F32 : FloatLanes {
  static constexpr size_t kLanes = 8, kBytes = 4;
  static V load(const char* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static void store(char* p, V v) { _mm256_storeu_ps(reinterpret_cast<float*>(p), v); }
  static void stream(char* p, V v) { _mm256_stream_ps(reinterpret_cast<float*>(p), v); }
  static V round(V v) { return v; }
  static V set1(const void* s) {
    float f;
    memcpy(&f, s, sizeof f);
    return _mm256_set1_ps(f);
  }
};

struct F16 : FloatLanes {
  static constexpr size_t kLanes = 8, kBytes = 2;
  static constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  static V load(const char* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(char* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, kRound));
  }
  static void stream(char* p, V v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, kRound));
  }
  static V round(V v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, kRound)); }
  static V set1(const void* s) {
    uint16_t h;
    memcpy(&h, s, sizeof h);
    return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
  }
};

struct Bf16 : FloatLanes {
  static constexpr size_t kLanes = 8, kBytes = 2;
  static V widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  // Round to nearest even on the bits; NaNs keep their top bits and become quiet.
  static __m256i narrow32(V v) {
    __m256i x = _mm256_castps_si256(v);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i bias =
        _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7FFF));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    __m256i nan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(rounded, nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  }
  static __m128i narrow(V v) {
    __m256i r = narrow32(v);
    // packus works per 128-bit half; gather the two useful quadwords into the low half.
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
  }
  static V load(const char* p) {
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(char* p, V v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow(v)); }
  static void stream(char* p, V v) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), narrow(v)); }
  static V round(V v) { return _mm256_castsi256_ps(_mm256_slli_epi32(narrow32(v), 16)); }
  static V set1(const void* s) {
    uint16_t h;
    memcpy(&h, s, sizeof h);
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return _mm256_set1_ps(f);
  }
};

struct F64 {
  using V = __m256d;
  static constexpr size_t kLanes = 4, kBytes = 8;
  static V load(const char* p) { return _mm256_loadu_pd(reinterpret_cast<const double*>(p)); }
  static void store(char* p, V v) { _mm256_storeu_pd(reinterpret_cast<double*>(p), v); }
  static void stream(char* p, V v) { _mm256_stream_pd(reinterpret_cast<double*>(p), v); }
  static V round(V v) { return v; }
  static V set1(const void* s) {
    double d;
    memcpy(&d, s, sizeof d);
    return _mm256_set1_pd(d);
  }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V max(V a, V b) {
    return _mm256_blendv_pd(_mm256_max_pd(a, b), a, _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
  }
  static V min(V a, V b) {
    return _mm256_blendv_pd(_mm256_min_pd(a, b), a, _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
  }
};

// Integer formats share loads and stores; kBytes is the element width.
template <size_t kElemBytes>
struct IntLanes {
  using V = __m256i;
  static constexpr size_t kLanes = 32 / kElemBytes, kBytes = kElemBytes;
  static V load(const char* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static void store(char* p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static void stream(char* p, V v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v); }
  static V round(V v) { return v; }
  static V set1(const void* s) {
    if constexpr (kElemBytes == 1) {
      int8_t x;
      memcpy(&x, s, 1);
      return _mm256_set1_epi8(x);
    } else if constexpr (kElemBytes == 4) {
      int32_t x;
      memcpy(&x, s, 4);
      return _mm256_set1_epi32(x);
    } else {
      long long x;
      memcpy(&x, s, 8);
      return _mm256_set1_epi64x(x);
    }
  }
};

// Byte products: AVX2 multiplies 16-bit lanes only, so do the even and odd bytes separately.
inline __m256i mulEpi8(__m256i a, __m256i b) {
  __m256i even = _mm256_mullo_epi16(a, b);
  __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
  return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00FF)),
                         _mm256_slli_epi16(odd, 8));
}

struct I8 : IntLanes<1> {
  static V add(V a, V b) { return _mm256_add_epi8(a, b); }
  static V mul(V a, V b) { return mulEpi8(a, b); }
  static V max(V a, V b) { return _mm256_max_epi8(a, b); }
  static V min(V a, V b) { return _mm256_min_epi8(a, b); }
};
struct U8 : IntLanes<1> {
  static V add(V a, V b) { return _mm256_add_epi8(a, b); }
  static V mul(V a, V b) { return mulEpi8(a, b); }
  static V max(V a, V b) { return _mm256_max_epu8(a, b); }
  static V min(V a, V b) { return _mm256_min_epu8(a, b); }
};
struct I32 : IntLanes<4> {
  static V add(V a, V b) { return _mm256_add_epi32(a, b); }
  static V mul(V a, V b) { return _mm256_mullo_epi32(a, b); }
  static V max(V a, V b) { return _mm256_max_epi32(a, b); }
  static V min(V a, V b) { return _mm256_min_epi32(a, b); }
};
struct U32 : IntLanes<4> {
  static V add(V a, V b) { return _mm256_add_epi32(a, b); }
  static V mul(V a, V b) { return _mm256_mullo_epi32(a, b); }
  static V max(V a, V b) { return _mm256_max_epu32(a, b); }
  static V min(V a, V b) { return _mm256_min_epu32(a, b); }
};

// 64-bit low product from 32x32->64 pieces: lo*lo + ((hi*lo + lo*hi) << 32).
inline __m256i mulEpi64(__m256i a, __m256i b) {
  __m256i lo = _mm256_mul_epu32(a, b);
  __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                   _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
  return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

struct I64 : IntLanes<8> {
  static V add(V a, V b) { return _mm256_add_epi64(a, b); }
  static V mul(V a, V b) { return mulEpi64(a, b); }
  static V max(V a, V b) { return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b)); }
  static V min(V a, V b) { return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(b, a)); }
};
struct U64 : IntLanes<8> {
  // Unsigned order = signed order after flipping the sign bits.
  static V gt(V a, V b) {
    const V flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    return _mm256_cmpgt_epi64(_mm256_xor_si256(a, flip), _mm256_xor_si256(b, flip));
  }
  static V add(V a, V b) { return _mm256_add_epi64(a, b); }
  static V mul(V a, V b) { return mulEpi64(a, b); }
  static V max(V a, V b) { return _mm256_blendv_epi8(b, a, gt(a, b)); }
  static V min(V a, V b) { return _mm256_blendv_epi8(b, a, gt(b, a)); }
};

#include "src/common/reduce_simd_loops.inc"

}  // namespace

size_t reduceAvx2(const ReduceArgs& r) { return dispatchReduce(r); }

size_t streamCopyAvx2(void* dst, const void* src, size_t bytes) {
  // The caller aligned dst to 64 bytes; whole cache lines only, so no line is half streamed.
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    __m256i v2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    __m256i v3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), v0);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), v1);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 64), v2);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 96), v3);
  }
  for (; i + 64 <= bytes; i += 64) {
    __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), v0);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), v1);
  }
  _mm_sfence();
  return i;
}

size_t scaleAvx2(DataType type, void* dst, const void* src, const void* scalar, size_t count) {
  return dispatchScale(type, dst, src, scalar, count);
}

}  // namespace weft::kernels
