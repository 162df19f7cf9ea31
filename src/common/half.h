// Bit-exact conversions between fp32 and the narrow float formats (fp16, bf16, fp8 e4m3/e5m2),
// all rounding to nearest even. Kept header-only so the scalar kernels inline them, and written
// as WEFT_HD code so the CUDA kernels compile this very source: host and device results agree
// bit for bit.
//
// NaN conventions match the x86 F16C instructions, so scalar and SIMD kernels agree bit for bit:
// widening sets the quiet bit, narrowing keeps the sign and the top payload bits and sets the
// quiet bit. The SIMD files must not include this header (they are compiled for other ISAs and
// inline functions here would be emitted with those instructions; see reduce_internal.h).
#pragma once
#include <cstdint>
#include <cstring>

#include "src/common/host_device.h"

namespace weft::fp {

WEFT_HD_INLINE uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

WEFT_HD_INLINE float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Rounds the magnitude `ax` (fp32 bits, sign cleared, finite) to nearest even in a format with
// kMant mantissa bits and exponent bias kBias, and returns the format's code without the sign.
// Codes past the largest finite value come back unclamped; callers decide inf vs saturation.
template <int kMant, int kBias>
WEFT_HD_INLINE uint32_t roundMagnitude(uint32_t ax) {
  constexpr int kMinNormalExp = 127 + 1 - kBias;  // fp32 biased exponent of the smallest normal
  constexpr int kDrop = 23 - kMant;
  int exp = static_cast<int>(ax >> 23);
  if (exp >= kMinNormalExp) {
    // Rebias the exponent; the carry of a round-up may move into the exponent, which is correct.
    uint32_t r = ax - (static_cast<uint32_t>(127 - kBias) << 23);
    return (r + ((1u << (kDrop - 1)) - 1) + ((r >> kDrop) & 1)) >> kDrop;
  }
  // Subnormal in the target format (fp32 subnormals are far below every target's range).
  if (exp == 0) return 0;
  uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
  int shift = kDrop + (kMinNormalExp - exp);
  if (shift > 24) return 0;  // below half of the smallest subnormal
  uint32_t q = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  return q;
}

// ---- fp16 (IEEE binary16) ----

WEFT_HD_INLINE float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return bitsFloat(sign | 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0));
  if (exp != 0) return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  // Subnormal or zero: mant * 2^-24 is exact in fp32.
  float v = static_cast<float>(mant) * bitsFloat(0x33800000u);
  return sign ? -v : v;
}

WEFT_HD_INLINE uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  uint32_t code = roundMagnitude<10, 15>(ax & 0x7FFFFFFFu);
  if (ax == 0x7F800000u || code >= 0x7C00u) code = 0x7C00u;  // IEEE overflow goes to inf
  return static_cast<uint16_t>(sign | code);
}

// ---- bf16 (upper half of fp32) ----

WEFT_HD_INLINE float bf16ToFloat(uint16_t h) { return bitsFloat(static_cast<uint32_t>(h) << 16); }

WEFT_HD_INLINE uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1)) >> 16);
}

// ---- fp8 E4M3 (OCP E4M3FN: bias 7, no infinities, S.1111.111 is NaN, max finite 448) ----

WEFT_HD_INLINE float fp8e4m3ToFloat(uint8_t v) {
  uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  uint32_t exp = (v >> 3) & 0xF;
  uint32_t mant = v & 0x7u;
  if (exp == 0xF && mant == 0x7) return bitsFloat(sign | 0x7FC00000u);
  if (exp != 0) return bitsFloat(sign | ((exp + 120) << 23) | (mant << 20));
  float m = static_cast<float>(mant) * bitsFloat(0x3B000000u);  // mant * 2^-9
  return sign ? -m : m;
}

// Saturating (satfinite): every finite or infinite value beyond 448 becomes +-448; NaN stays NaN.
WEFT_HD_INLINE uint8_t floatToFp8e4m3(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);
  uint32_t code = ax == 0x7F800000u ? 0x7Eu : roundMagnitude<3, 7>(ax);
  if (code > 0x7Eu) code = 0x7Eu;
  return static_cast<uint8_t>(sign | code);
}

// ---- fp8 E5M2 (bias 15, IEEE-like: infinities and NaNs; it is the top byte of an fp16) ----

WEFT_HD_INLINE float fp8e5m2ToFloat(uint8_t v) {
  return halfToFloat(static_cast<uint16_t>(v << 8));
}

// Finite values beyond 57344 saturate to +-57344; infinities stay infinite; NaN stays NaN.
WEFT_HD_INLINE uint8_t floatToFp8e5m2(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Eu | ((ax >> 21) & 0x3u));
  if (ax == 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Cu);
  uint32_t code = roundMagnitude<2, 15>(ax);
  if (code > 0x7Bu) code = 0x7Bu;
  return static_cast<uint8_t>(sign | code);
}

}  // namespace weft::fp
