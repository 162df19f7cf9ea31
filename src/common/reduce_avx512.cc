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

struct OpSum {
  template <class F>
  static typename F::V apply(typename F::V a, typename F::V b) {
    return F::add(a, b);
  }
};
struct OpProd {
  template <class F>
  static typename F::V apply(typename F::V a, typename F::V b) {
    return F::mul(a, b);
  }
};
struct OpMax {
  template <class F>
  static typename F::V apply(typename F::V a, typename F::V b) {
    return F::max(a, b);
  }
};
struct OpMin {
  template <class F>
  static typename F::V apply(typename F::V a, typename F::V b) {
    return F::min(a, b);
  }
};

// A PreMulSum operand is rounded to the element type after the multiply, like the scalar code.
template <class F, bool kScaled>
inline typename F::V operand(typename F::V v, typename F::V s) {
  if constexpr (kScaled) return F::round(F::mul(v, s));
  return v;
}

// Four vectors (256 bytes) per iteration keep enough loads in flight to reach memory bandwidth.
// kStream writes with non-temporal stores (dst must be aligned to 64 bytes) and fences at the end
// so that whoever publishes the result afterwards publishes complete data.
template <class F, bool kStream>
inline void put(char* p, typename F::V v) {
  if constexpr (kStream)
    F::stream(p, v);
  else
    F::store(p, v);
}

template <class F, class Op, bool kScaleA, bool kScaleB, bool kStream = false>
size_t binaryLoop(const ReduceArgs& r) {
  using V = typename F::V;
  constexpr size_t kW = F::kLanes, kB = F::kBytes;
  const char* a = static_cast<const char*>(r.a);
  const char* b = static_cast<const char*>(r.b);
  char* d = static_cast<char*>(r.dst);
  V sa{}, sb{};
  if constexpr (kScaleA) sa = F::set1(r.scaleA);
  if constexpr (kScaleB) sb = F::set1(r.scaleB);
  size_t i = 0;
  for (; i + 4 * kW <= r.count; i += 4 * kW) {
    const size_t o = i * kB;
    V x0 = operand<F, kScaleA>(F::load(a + o), sa);
    V x1 = operand<F, kScaleA>(F::load(a + o + kW * kB), sa);
    V x2 = operand<F, kScaleA>(F::load(a + o + 2 * kW * kB), sa);
    V x3 = operand<F, kScaleA>(F::load(a + o + 3 * kW * kB), sa);
    V y0 = operand<F, kScaleB>(F::load(b + o), sb);
    V y1 = operand<F, kScaleB>(F::load(b + o + kW * kB), sb);
    V y2 = operand<F, kScaleB>(F::load(b + o + 2 * kW * kB), sb);
    V y3 = operand<F, kScaleB>(F::load(b + o + 3 * kW * kB), sb);
    put<F, kStream>(d + o, Op::template apply<F>(x0, y0));
    put<F, kStream>(d + o + kW * kB, Op::template apply<F>(x1, y1));
    put<F, kStream>(d + o + 2 * kW * kB, Op::template apply<F>(x2, y2));
    put<F, kStream>(d + o + 3 * kW * kB, Op::template apply<F>(x3, y3));
  }
  for (; i + kW <= r.count; i += kW) {
    V x = operand<F, kScaleA>(F::load(a + i * kB), sa);
    V y = operand<F, kScaleB>(F::load(b + i * kB), sb);
    put<F, kStream>(d + i * kB, Op::template apply<F>(x, y));
  }
  if constexpr (kStream) _mm_sfence();
  return i;
}

template <class F>
size_t forOp(const ReduceArgs& r) {
  // Only PreMulSum (lowered to Sum) carries scales.
  if (r.scaleA && r.scaleB) return binaryLoop<F, OpSum, true, true>(r);
  if (r.scaleA) return binaryLoop<F, OpSum, true, false>(r);
  if (r.scaleB) return binaryLoop<F, OpSum, false, true>(r);
  if (r.stream) {
    switch (r.op) {
      case RedOp::kProd:
        return binaryLoop<F, OpProd, false, false, true>(r);
      case RedOp::kMax:
        return binaryLoop<F, OpMax, false, false, true>(r);
      case RedOp::kMin:
        return binaryLoop<F, OpMin, false, false, true>(r);
      default:
        return binaryLoop<F, OpSum, false, false, true>(r);
    }
  }
  switch (r.op) {
    case RedOp::kProd:
      return binaryLoop<F, OpProd, false, false>(r);
    case RedOp::kMax:
      return binaryLoop<F, OpMax, false, false>(r);
    case RedOp::kMin:
      return binaryLoop<F, OpMin, false, false>(r);
    default:
      return binaryLoop<F, OpSum, false, false>(r);
  }
}

template <class F>
size_t scaleLoop(void* dst, const void* src, const void* scalar, size_t count) {
  using V = typename F::V;
  constexpr size_t kW = F::kLanes, kB = F::kBytes;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  const V k = F::set1(scalar);
  size_t i = 0;
  for (; i + 2 * kW <= count; i += 2 * kW) {
    V x0 = F::load(s + i * kB);
    V x1 = F::load(s + (i + kW) * kB);
    F::store(d + i * kB, F::mul(x0, k));
    F::store(d + (i + kW) * kB, F::mul(x1, k));
  }
  for (; i + kW <= count; i += kW) F::store(d + i * kB, F::mul(F::load(s + i * kB), k));
  return i;
}

}  // namespace

size_t reduceAvx512(const ReduceArgs& r) {
  switch (r.type) {
    case DataType::kInt8:
      return forOp<I8>(r);
    case DataType::kUint8:
      return forOp<U8>(r);
    case DataType::kInt32:
      return forOp<I32>(r);
    case DataType::kUint32:
      return forOp<U32>(r);
    case DataType::kInt64:
      return forOp<I64>(r);
    case DataType::kUint64:
      return forOp<U64>(r);
    case DataType::kFloat16:
      return forOp<F16>(r);
    case DataType::kFloat32:
      return forOp<F32>(r);
    case DataType::kFloat64:
      return forOp<F64>(r);
    case DataType::kBfloat16:
      return forOp<Bf16>(r);
    default:
      return 0;  // fp8: scalar
  }
}

size_t scaleAvx512(DataType type, void* dst, const void* src, const void* scalar, size_t count) {
  switch (type) {
    case DataType::kFloat16:
      return scaleLoop<F16>(dst, src, scalar, count);
    case DataType::kFloat32:
      return scaleLoop<F32>(dst, src, scalar, count);
    case DataType::kFloat64:
      return scaleLoop<F64>(dst, src, scalar, count);
    case DataType::kBfloat16:
      return scaleLoop<Bf16>(dst, src, scalar, count);
    default:
      return 0;
  }
}

}  // namespace weft::kernels
