// AVX-512 kernels (F, BW, DQ, VL; plus F16C). Built with the matching -m flags and entered only
// after a CPU check; see reduce_internal.h for why everything here stays in an unnamed namespace.
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "src/common/reduce_internal.h"

namespace weft::kernels {
namespace {

// Float max / min with the scalar code's NaN rule: vmaxps returns its second operand when either
// is NaN, so patch the lanes where b is NaN back to a.
struct FloatLanes {
  using V = __m512;
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V max(V a, V b) {
    return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), a);
  }
  static V min(V a, V b) {
    return _mm512_mask_mov_ps(_mm512_min_ps(a, b), _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), a);
  }
};

struct F32 : FloatLanes {
  static constexpr size_t kLanes = 16, kBytes = 4;
  static V load(const char* p) { return _mm512_loadu_ps(p); }
  static void store(char* p, V v) { _mm512_storeu_ps(p, v); }
  static void stream(char* p, V v) { _mm512_stream_ps(reinterpret_cast<float*>(p), v); }
  static V round(V v) { return v; }
  static V set1(const void* s) {
    float f;
    memcpy(&f, s, sizeof f);
    return _mm512_set1_ps(f);
  }
};

struct F16 : FloatLanes {
  static constexpr size_t kLanes = 16, kBytes = 2;
  static constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  static V load(const char* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(char* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, kRound));
  }
  static void stream(char* p, V v) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, kRound));
  }
  static V round(V v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, kRound)); }
  static V set1(const void* s) {
    uint16_t h;
    memcpy(&h, s, sizeof h);
    return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h)));
  }
};

struct Bf16 : FloatLanes {
  static constexpr size_t kLanes = 16, kBytes = 2;
  // Round to nearest even on the bits; NaNs keep their top bits and become quiet.
  static __m512i narrow32(V v) {
    __m512i x = _mm512_castps_si512(v);
    __m512i hi = _mm512_srli_epi32(x, 16);
    __m512i bias =
        _mm512_add_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7FFF));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
    __m512i nan = _mm512_or_si512(hi, _mm512_set1_epi32(0x40));
    return _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan);
  }
  static V load(const char* p) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static void store(char* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(narrow32(v)));
  }
  static void stream(char* p, V v) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(narrow32(v)));
  }
  static V round(V v) { return _mm512_castsi512_ps(_mm512_slli_epi32(narrow32(v), 16)); }
  static V set1(const void* s) {
    uint16_t h;
    memcpy(&h, s, sizeof h);
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return _mm512_set1_ps(f);
  }
};

struct F64 {
  using V = __m512d;
  static constexpr size_t kLanes = 8, kBytes = 8;
  static V load(const char* p) { return _mm512_loadu_pd(p); }
  static void store(char* p, V v) { _mm512_storeu_pd(p, v); }
  static void stream(char* p, V v) { _mm512_stream_pd(reinterpret_cast<double*>(p), v); }
  static V round(V v) { return v; }
  static V set1(const void* s) {
    double d;
    memcpy(&d, s, sizeof d);
    return _mm512_set1_pd(d);
  }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  static V max(V a, V b) {
    return _mm512_mask_mov_pd(_mm512_max_pd(a, b), _mm512_cmp_pd_mask(b, b, _CMP_UNORD_Q), a);
  }
  static V min(V a, V b) {
    return _mm512_mask_mov_pd(_mm512_min_pd(a, b), _mm512_cmp_pd_mask(b, b, _CMP_UNORD_Q), a);
  }
};

// Integer formats share loads and stores; kBytes is the element width.
template <size_t kElemBytes>
struct IntLanes {
  using V = __m512i;
  static constexpr size_t kLanes = 64 / kElemBytes, kBytes = kElemBytes;
  static V load(const char* p) { return _mm512_loadu_si512(p); }
  static void store(char* p, V v) { _mm512_storeu_si512(p, v); }
  static void stream(char* p, V v) { _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v); }
  static V round(V v) { return v; }
  static V set1(const void* s) {
    if constexpr (kElemBytes == 1) {
      int8_t x;
      memcpy(&x, s, 1);
      return _mm512_set1_epi8(x);
    } else if constexpr (kElemBytes == 4) {
      int32_t x;
      memcpy(&x, s, 4);
      return _mm512_set1_epi32(x);
    } else {
      long long x;
      memcpy(&x, s, 8);
      return _mm512_set1_epi64(x);
    }
  }
};

// Byte products: there is no 8-bit multiply, so do the even and odd bytes in 16-bit lanes.
inline __m512i mulEpi8(__m512i a, __m512i b) {
  __m512i even = _mm512_mullo_epi16(a, b);
  __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));
  return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0x00FF)),
                         _mm512_slli_epi16(odd, 8));
}

struct I8 : IntLanes<1> {
  static V add(V a, V b) { return _mm512_add_epi8(a, b); }
  static V mul(V a, V b) { return mulEpi8(a, b); }
  static V max(V a, V b) { return _mm512_max_epi8(a, b); }
  static V min(V a, V b) { return _mm512_min_epi8(a, b); }
};
struct U8 : IntLanes<1> {
  static V add(V a, V b) { return _mm512_add_epi8(a, b); }
  static V mul(V a, V b) { return mulEpi8(a, b); }
  static V max(V a, V b) { return _mm512_max_epu8(a, b); }
  static V min(V a, V b) { return _mm512_min_epu8(a, b); }
};
struct I32 : IntLanes<4> {
  static V add(V a, V b) { return _mm512_add_epi32(a, b); }
  static V mul(V a, V b) { return _mm512_mullo_epi32(a, b); }
  static V max(V a, V b) { return _mm512_max_epi32(a, b); }
  static V min(V a, V b) { return _mm512_min_epi32(a, b); }
};
struct U32 : IntLanes<4> {
  static V add(V a, V b) { return _mm512_add_epi32(a, b); }
  static V mul(V a, V b) { return _mm512_mullo_epi32(a, b); }
  static V max(V a, V b) { return _mm512_max_epu32(a, b); }
  static V min(V a, V b) { return _mm512_min_epu32(a, b); }
};
struct I64 : IntLanes<8> {
  static V add(V a, V b) { return _mm512_add_epi64(a, b); }
  static V mul(V a, V b) { return _mm512_mullo_epi64(a, b); }
  static V max(V a, V b) { return _mm512_max_epi64(a, b); }
  static V min(V a, V b) { return _mm512_min_epi64(a, b); }
};
struct U64 : IntLanes<8> {
  static V add(V a, V b) { return _mm512_add_epi64(a, b); }
  static V mul(V a, V b) { return _mm512_mullo_epi64(a, b); }
  static V max(V a, V b) { return _mm512_max_epu64(a, b); }
  static V min(V a, V b) { return _mm512_min_epu64(a, b); }
};

#include "src/common/reduce_simd_loops.inc"

}  // namespace

size_t reduceAvx512(const ReduceArgs& r) { return dispatchReduce(r); }

size_t scaleAvx512(DataType type, void* dst, const void* src, const void* scalar, size_t count) {
  return dispatchScale(type, dst, src, scalar, count);
}

}  // namespace weft::kernels
