// The element arithmetic of every reduction: element formats (storage type, arithmetic type,
// conversions), operators, the PreMulSum scaling and Avg's integer division, written once as
// WEFT_HD code. Rule: nothing else applies an operator or a conversion to values. The host's
// scalar kernels (reduce_scalar.cc, which the host interpreter and its fast path reach through
// reduce.h) and the device interpreter (src/cuda/device_interp.h) compile this same source, so
// a host test of it tests the device arithmetic too, and both paths give the same bits. The SIMD
// files must not include it (see reduce_internal.h): their vector loops are written against the
// same rules, and reduce_simd_test.cc checks them element by element against these functions
// (every type and operator, NaNs, infinities, signed zeros, subnormals, narrow-format rounding).
// The plan verifier computes no values (it tracks which ranks' contributions an element holds),
// so it needs none of this.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "src/common/datatype.h"
#include "src/common/half.h"
#include "src/common/host_device.h"

namespace weft::elements {

// Max / Min with fmaxf / fminf's NaN rule (a NaN operand yields the other one). Written out so the
// result, down to which NaN or which zero comes back, equals what the SIMD code computes.
template <class F>
WEFT_HD_INLINE F floatMax(F a, F b) {
  if (b != b) return a;
  if (a != a) return b;
  return a > b ? a : b;
}

template <class F>
WEFT_HD_INLINE F floatMin(F a, F b) {
  if (b != b) return a;
  if (a != a) return b;
  return a < b ? a : b;
}

// Element traits: Storage is what memory holds, Calc what arithmetic runs in. Integer arithmetic
// runs in the unsigned type so overflow wraps (two's complement bits) instead of being UB.
template <class S>
struct IntElem {
  using Storage = S;
  using Calc = S;
  using U = std::make_unsigned_t<S>;
  static WEFT_HD_INLINE Calc toCalc(S v) { return v; }
  static WEFT_HD_INLINE S fromCalc(Calc v) { return v; }
  static WEFT_HD_INLINE Calc add(Calc a, Calc b) {
    return static_cast<S>(static_cast<U>(U(a) + U(b)));
  }
  static WEFT_HD_INLINE Calc mul(Calc a, Calc b) {
    // Promote to at least unsigned int so uint8/uint16 products cannot overflow a signed int.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<S>(static_cast<U>(W(U(a)) * W(U(b))));
  }
  static WEFT_HD_INLINE Calc max(Calc a, Calc b) { return a > b ? a : b; }
  static WEFT_HD_INLINE Calc min(Calc a, Calc b) { return a < b ? a : b; }
};

template <class F>
struct FloatElem {
  using Storage = F;
  using Calc = F;
  static WEFT_HD_INLINE Calc toCalc(F v) { return v; }
  static WEFT_HD_INLINE F fromCalc(Calc v) { return v; }
  static WEFT_HD_INLINE Calc add(Calc a, Calc b) { return a + b; }
  static WEFT_HD_INLINE Calc mul(Calc a, Calc b) { return a * b; }
  static WEFT_HD_INLINE Calc max(Calc a, Calc b) { return floatMax(a, b); }
  static WEFT_HD_INLINE Calc min(Calc a, Calc b) { return floatMin(a, b); }
};

// The narrow float formats' conversions, as types (a device function cannot be a template's
// function-pointer argument in every compiler).
struct HalfFormat {
  using Bits = uint16_t;
  static WEFT_HD_INLINE float widen(Bits v) { return fp::halfToFloat(v); }
  static WEFT_HD_INLINE Bits narrow(float v) { return fp::floatToHalf(v); }
};
struct Bf16Format {
  using Bits = uint16_t;
  static WEFT_HD_INLINE float widen(Bits v) { return fp::bf16ToFloat(v); }
  static WEFT_HD_INLINE Bits narrow(float v) { return fp::floatToBf16(v); }
};
struct E4m3Format {
  using Bits = uint8_t;
  static WEFT_HD_INLINE float widen(Bits v) { return fp::fp8e4m3ToFloat(v); }
  static WEFT_HD_INLINE Bits narrow(float v) { return fp::floatToFp8e4m3(v); }
};
struct E5m2Format {
  using Bits = uint8_t;
  static WEFT_HD_INLINE float widen(Bits v) { return fp::fp8e5m2ToFloat(v); }
  static WEFT_HD_INLINE Bits narrow(float v) { return fp::floatToFp8e5m2(v); }
};

// Narrow floats: every binary operation runs in fp32 and is rounded back to the format.
template <class Format>
struct NarrowElem {
  using Storage = typename Format::Bits;
  using Calc = float;
  static WEFT_HD_INLINE Calc toCalc(Storage v) { return Format::widen(v); }
  static WEFT_HD_INLINE Storage fromCalc(Calc v) { return Format::narrow(v); }
  static WEFT_HD_INLINE Calc add(Calc a, Calc b) { return a + b; }
  static WEFT_HD_INLINE Calc mul(Calc a, Calc b) { return a * b; }
  static WEFT_HD_INLINE Calc max(Calc a, Calc b) { return floatMax(a, b); }
  static WEFT_HD_INLINE Calc min(Calc a, Calc b) { return floatMin(a, b); }
};

using HalfElem = NarrowElem<HalfFormat>;
using Bf16Elem = NarrowElem<Bf16Format>;
using E4m3Elem = NarrowElem<E4m3Format>;
using E5m2Elem = NarrowElem<E5m2Format>;

// The traits of each DataType, for code that knows the type at compile time.
template <DataType kType>
struct ElemOf;
template <>
struct ElemOf<DataType::kInt8> {
  using type = IntElem<int8_t>;
};
template <>
struct ElemOf<DataType::kUint8> {
  using type = IntElem<uint8_t>;
};
template <>
struct ElemOf<DataType::kInt32> {
  using type = IntElem<int32_t>;
};
template <>
struct ElemOf<DataType::kUint32> {
  using type = IntElem<uint32_t>;
};
template <>
struct ElemOf<DataType::kInt64> {
  using type = IntElem<int64_t>;
};
template <>
struct ElemOf<DataType::kUint64> {
  using type = IntElem<uint64_t>;
};
template <>
struct ElemOf<DataType::kFloat16> {
  using type = HalfElem;
};
template <>
struct ElemOf<DataType::kFloat32> {
  using type = FloatElem<float>;
};
template <>
struct ElemOf<DataType::kFloat64> {
  using type = FloatElem<double>;
};
template <>
struct ElemOf<DataType::kBfloat16> {
  using type = Bf16Elem;
};
template <>
struct ElemOf<DataType::kFp8E4M3> {
  using type = E4m3Elem;
};
template <>
struct ElemOf<DataType::kFp8E5M2> {
  using type = E5m2Elem;
};

struct OpSum {
  template <class E>
  static WEFT_HD_INLINE typename E::Calc apply(typename E::Calc a, typename E::Calc b) {
    return E::add(a, b);
  }
};
struct OpProd {
  template <class E>
  static WEFT_HD_INLINE typename E::Calc apply(typename E::Calc a, typename E::Calc b) {
    return E::mul(a, b);
  }
};
struct OpMax {
  template <class E>
  static WEFT_HD_INLINE typename E::Calc apply(typename E::Calc a, typename E::Calc b) {
    return E::max(a, b);
  }
};
struct OpMin {
  template <class E>
  static WEFT_HD_INLINE typename E::Calc apply(typename E::Calc a, typename E::Calc b) {
    return E::min(a, b);
  }
};

// The scaled operand is rounded to the element type before the sum: two operations, two roundings.
template <class E, bool kScaled>
WEFT_HD_INLINE typename E::Calc operand(typename E::Storage v, typename E::Calc scale) {
  if constexpr (kScaled) return E::toCalc(E::fromCalc(E::mul(E::toCalc(v), scale)));
  return E::toCalc(v);
}

// One output element: A(a) op B(b), where A(x) = x * sa when kScaleA (PreMulSum), else x.
template <class E, class Op, bool kScaleA, bool kScaleB>
WEFT_HD_INLINE typename E::Storage combine(typename E::Storage a, typename E::Storage b,
                                           typename E::Calc sa, typename E::Calc sb) {
  return E::fromCalc(Op::template apply<E>(operand<E, kScaleA>(a, sa), operand<E, kScaleB>(b, sb)));
}

// One element of a scaled copy: src * s, rounded once.
template <class E>
WEFT_HD_INLINE typename E::Storage scale(typename E::Storage v, typename E::Calc s) {
  return E::fromCalc(E::mul(E::toCalc(v), s));
}

// A Scalar's bytes (PreMulSum's factor, stored in the element type) as E's arithmetic type.
template <class E>
WEFT_HD_INLINE typename E::Calc scalarOf(const Scalar& scalar) {
  typename E::Storage v{};
  auto* to = reinterpret_cast<unsigned char*>(&v);
  for (unsigned k = 0; k < sizeof v; ++k) to[k] = scalar.bytes[k];
  return E::toCalc(v);
}

// One element of Avg's final division on the integer types (Sum, then divide by the ranks): in
// 64-bit arithmetic of the type's signedness, so a divisor wider than the type stays what it
// is, rounding toward zero like C division. A floating type divides in its arithmetic type
// (floating Avg normally scales by 1/n instead: PreMulSum).
template <class E>
WEFT_HD_INLINE typename E::Storage divide(typename E::Storage v, uint64_t divisor) {
  using S = typename E::Storage;
  if constexpr (std::is_integral_v<typename E::Calc>) {
    using W = std::conditional_t<std::is_signed_v<S>, int64_t, uint64_t>;
    return static_cast<S>(static_cast<W>(v) / static_cast<W>(divisor));
  } else {
    return E::fromCalc(E::toCalc(v) / static_cast<typename E::Calc>(divisor));
  }
}

// Calls fn with the operator type (OpSum, OpProd, OpMax, OpMin) that reduces for `op`: Sum,
// PreMulSum (a sum of scaled operands) and Avg (a sum, scaled or divided afterwards) reduce
// with OpSum. The one map from RedOp to arithmetic, for every kernel that dispatches on it.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Fn>
WEFT_HD_INLINE decltype(auto) withOp(RedOp op, Fn&& fn) {
  switch (op) {
    case RedOp::kProd:
      return fn(OpProd{});
    case RedOp::kMax:
      return fn(OpMax{});
    case RedOp::kMin:
      return fn(OpMin{});
    default:
      return fn(OpSum{});
  }
}

// Calls fn with a value-initialized traits object of type t. Returns false for an invalid type.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Fn>
WEFT_HD_INLINE bool withElem(DataType t, Fn&& fn) {
  switch (t) {
    case DataType::kInt8:
      fn(IntElem<int8_t>{});
      return true;
    case DataType::kUint8:
      fn(IntElem<uint8_t>{});
      return true;
    case DataType::kInt32:
      fn(IntElem<int32_t>{});
      return true;
    case DataType::kUint32:
      fn(IntElem<uint32_t>{});
      return true;
    case DataType::kInt64:
      fn(IntElem<int64_t>{});
      return true;
    case DataType::kUint64:
      fn(IntElem<uint64_t>{});
      return true;
    case DataType::kFloat16:
      fn(HalfElem{});
      return true;
    case DataType::kFloat32:
      fn(FloatElem<float>{});
      return true;
    case DataType::kFloat64:
      fn(FloatElem<double>{});
      return true;
    case DataType::kBfloat16:
      fn(Bf16Elem{});
      return true;
    case DataType::kFp8E4M3:
      fn(E4m3Elem{});
      return true;
    case DataType::kFp8E5M2:
      fn(E5m2Elem{});
      return true;
  }
  return false;
}

}  // namespace weft::elements
