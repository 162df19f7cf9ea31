// Bit patterns of the soak's values: small integers encoded exactly in every NCCL type, and
// float formats decoded for the one tolerance comparison (floating-point Avg). Written from the
// formats' definitions, independently of the library's own conversions.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "nccl.h"

namespace soak {

inline bool isFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}
inline bool isUnsigned(ncclDataType_t t) {
  return t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
}

// A float format: exponent bits, mantissa bits, bias.
struct Format {
  int exp, mant, bias;
};
inline Format formatOf(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16:
      return {5, 10, 15};
    case ncclBfloat16:
      return {8, 7, 127};
    case ncclFloat8e4m3:
      return {4, 3, 7};
    case ncclFloat8e5m2:
      return {5, 2, 15};
    default:
      return {0, 0, 0};
  }
}

// Encodes a small integer, exactly representable in the format, as its bit pattern.
inline uint32_t encodeNarrow(int64_t v, Format f) {
  if (v == 0) return 0;
  uint32_t sign = v < 0 ? 1u : 0u;
  uint64_t m = static_cast<uint64_t>(v < 0 ? -v : v);
  int e = 63 - __builtin_clzll(m);  // m = 1.frac x 2^e
  uint64_t frac = m - (1ull << e);
  uint32_t mant = static_cast<uint32_t>(e >= f.mant ? frac >> (e - f.mant) : frac << (f.mant - e));
  return (sign << (f.exp + f.mant)) | (static_cast<uint32_t>(e + f.bias) << f.mant) | mant;
}

inline double decodeNarrow(uint32_t bits, Format f, bool e4m3) {
  const uint32_t sign = (bits >> (f.exp + f.mant)) & 1;
  const uint32_t exp = (bits >> f.mant) & ((1u << f.exp) - 1);
  const uint32_t mant = bits & ((1u << f.mant) - 1);
  const uint32_t maxExp = (1u << f.exp) - 1;
  double v;
  if (e4m3 && exp == maxExp && mant == (1u << f.mant) - 1) {
    v = NAN;
  } else if (!e4m3 && exp == maxExp) {
    v = mant ? NAN : INFINITY;
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - f.bias - f.mant);
  } else {
    v = std::ldexp(static_cast<double>(mant | (1u << f.mant)),
                   static_cast<int>(exp) - f.bias - f.mant);
  }
  return sign ? -v : v;
}

inline void encode(ncclDataType_t t, int64_t v, uint8_t* out) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      out[0] = static_cast<uint8_t>(v);
      return;
    case ncclInt32:
    case ncclUint32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(out, &x, 4);
      return;
    }
    case ncclInt64:
    case ncclUint64: {
      uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(out, &x, 8);
      return;
    }
    case ncclFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(out, &x, 4);
      return;
    }
    case ncclFloat64: {
      double x = static_cast<double>(v);
      std::memcpy(out, &x, 8);
      return;
    }
    case ncclFloat16:
    case ncclBfloat16: {
      uint16_t x = static_cast<uint16_t>(encodeNarrow(v, formatOf(t)));
      std::memcpy(out, &x, 2);
      return;
    }
    default:
      out[0] = static_cast<uint8_t>(encodeNarrow(v, formatOf(t)));
  }
}

inline double decode(ncclDataType_t t, const uint8_t* in) {
  switch (t) {
    case ncclFloat32: {
      float x;
      std::memcpy(&x, in, 4);
      return x;
    }
    case ncclFloat64: {
      double x;
      std::memcpy(&x, in, 8);
      return x;
    }
    case ncclFloat16:
    case ncclBfloat16: {
      uint16_t x;
      std::memcpy(&x, in, 2);
      return decodeNarrow(x, formatOf(t), false);
    }
    case ncclFloat8e4m3:
      return decodeNarrow(in[0], formatOf(t), true);
    case ncclFloat8e5m2:
      return decodeNarrow(in[0], formatOf(t), false);
    default:
      return 0;  // integers are compared by their bits
  }
}

// Unit roundoff and smallest subnormal of a float type (for the Avg tolerance).
inline double unitRoundoff(ncclDataType_t t) {
  return t == ncclFloat64      ? 0x1p-53
         : t == ncclFloat32    ? 0x1p-24
         : t == ncclFloat16    ? 0x1p-11
         : t == ncclBfloat16   ? 0x1p-8
         : t == ncclFloat8e4m3 ? 0x1p-4
                               : 0x1p-3;
}
inline double smallestSubnormal(ncclDataType_t t) {
  return t == ncclFloat16      ? 0x1p-24
         : t == ncclFloat8e4m3 ? 0x1p-9
         : t == ncclFloat8e5m2 ? 0x1p-16
                               : 0;
}

}  // namespace soak
