// Portable scalar kernels: the loops every SIMD level falls back to for what its vector code
// leaves (and that do all the work at the scalar level), and the element-wise helpers with no
// vector code. The element arithmetic itself is shared with the CUDA kernels
// (reduce_elements.h).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/common/reduce.h"
#include "src/common/reduce_elements.h"
#include "src/common/reduce_internal.h"

namespace weft {
namespace {

using kernels::ReduceArgs;

// Pointers may be misaligned for the element type (a byte offset into a slot), so elements are
// moved with memcpy, which compiles to plain loads and stores.
template <class S>
inline S loadAt(const void* p, size_t i) {
  S v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(S), sizeof(S));
  return v;
}

template <class S>
inline void storeAt(void* p, size_t i, S v) {
  std::memcpy(static_cast<char*>(p) + i * sizeof(S), &v, sizeof(S));
}

using elements::Bf16Elem;
using elements::E4m3Elem;
using elements::E5m2Elem;
using elements::HalfElem;
using elements::OpMax;
using elements::OpMin;
using elements::OpProd;
using elements::OpSum;
using elements::withElem;

template <class E, class Op, bool kScaleA, bool kScaleB>
void scalarLoop(void* dst, const void* a, const void* b, size_t n, typename E::Calc sa,
                typename E::Calc sb) {
  using S = typename E::Storage;
  for (size_t i = 0; i < n; ++i)
    storeAt<S>(
        dst, i,
        elements::combine<E, Op, kScaleA, kScaleB>(loadAt<S>(a, i), loadAt<S>(b, i), sa, sb));
}

// Only PreMulSum (lowered to Sum) carries scales, so only the sum has scaled variants.
template <class E>
void scalarPreMulSum(const ReduceArgs& r) {
  using S = typename E::Storage;
  typename E::Calc sa{}, sb{};
  if (r.scaleA) sa = E::toCalc(loadAt<S>(r.scaleA, 0));
  if (r.scaleB) sb = E::toCalc(loadAt<S>(r.scaleB, 0));
  if (r.scaleA && r.scaleB)
    scalarLoop<E, OpSum, true, true>(r.dst, r.a, r.b, r.count, sa, sb);
  else if (r.scaleA)
    scalarLoop<E, OpSum, true, false>(r.dst, r.a, r.b, r.count, sa, sb);
  else
    scalarLoop<E, OpSum, false, true>(r.dst, r.a, r.b, r.count, sa, sb);
}

}  // namespace

namespace kernels {

void reduceScalar(const ReduceArgs& r) {
  withElem(r.type, [&](auto e) {
    using E = decltype(e);
    if (r.scaleA || r.scaleB) return scalarPreMulSum<E>(r);
    const typename E::Calc none{};
    switch (r.op) {
      case RedOp::kProd:
        return scalarLoop<E, OpProd, false, false>(r.dst, r.a, r.b, r.count, none, none);
      case RedOp::kMax:
        return scalarLoop<E, OpMax, false, false>(r.dst, r.a, r.b, r.count, none, none);
      case RedOp::kMin:
        return scalarLoop<E, OpMin, false, false>(r.dst, r.a, r.b, r.count, none, none);
      default:
        return scalarLoop<E, OpSum, false, false>(r.dst, r.a, r.b, r.count, none, none);
    }
  });
}

void scaleScalar(DataType t, void* dst, const void* src, const void* scalar, size_t n) {
  withElem(t, [&](auto e) {
    using E = decltype(e);
    using S = typename E::Storage;
    auto s = E::toCalc(loadAt<S>(scalar, 0));
    for (size_t i = 0; i < n; ++i) storeAt<S>(dst, i, elements::scale<E>(loadAt<S>(src, i), s));
  });
}

}  // namespace kernels

void divideElements(DataType t, void* buf, size_t count, uint64_t divisor) {
  if (divisor == 0 || divisor == 1) return;
  auto divideAll = [&](auto zero) {
    using S = decltype(zero);
    // Divide in 64 bits so a divisor wider than S stays what it is; signed divides as signed.
    using W = std::conditional_t<std::is_signed_v<S>, int64_t, uint64_t>;
    W d = static_cast<W>(divisor);
    for (size_t i = 0; i < count; ++i)
      storeAt<S>(buf, i, static_cast<S>(static_cast<W>(loadAt<S>(buf, i)) / d));
  };
  switch (t) {
    case DataType::kInt8:
      return divideAll(int8_t{});
    case DataType::kUint8:
      return divideAll(uint8_t{});
    case DataType::kInt32:
      return divideAll(int32_t{});
    case DataType::kUint32:
      return divideAll(uint32_t{});
    case DataType::kInt64:
      return divideAll(int64_t{});
    case DataType::kUint64:
      return divideAll(uint64_t{});
    default:
      break;
  }
  // Floating types normally take PreMulSum 1/n; dividing still does the obvious thing.
  withElem(t, [&](auto e) {
    using E = decltype(e);
    using S = typename E::Storage;
    for (size_t i = 0; i < count; ++i) {
      auto v = E::toCalc(loadAt<S>(buf, i));
      storeAt<S>(buf, i, E::fromCalc(v / static_cast<typename E::Calc>(divisor)));
    }
  });
}

namespace {

// Correctly rounded 1/n for a narrow format: fp32's 1/n can sit on a narrow tie that the exact
// value is not on, so check the neighbouring codes against the exact value in double.
template <class E>
typename E::Storage narrowReciprocal(int n) {
  using S = typename E::Storage;
  double exact = 1.0 / n;
  S best = E::fromCalc(static_cast<float>(exact));
  double bestErr = std::fabs(static_cast<double>(E::toCalc(best)) - exact);
  for (int d = -1; d <= 1; d += 2) {
    S c = static_cast<S>(best + d);
    double v = static_cast<double>(E::toCalc(c));
    if (std::isnan(v) || std::signbit(v) != std::signbit(exact)) continue;
    double err = std::fabs(v - exact);
    if (err < bestErr || (err == bestErr && (c & 1) == 0)) best = c, bestErr = err;
  }
  return best;
}

}  // namespace

Scalar reciprocalScalar(DataType t, int n) {
  Scalar s;
  if (n == 0) return s;
  auto put = [&](auto v) { std::memcpy(s.bytes, &v, sizeof v); };
  switch (t) {
    case DataType::kFloat32:
      put(static_cast<float>(1.0 / n));
      break;
    case DataType::kFloat64:
      put(1.0 / n);
      break;
    case DataType::kFloat16:
      put(narrowReciprocal<HalfElem>(n));
      break;
    case DataType::kBfloat16:
      put(narrowReciprocal<Bf16Elem>(n));
      break;
    case DataType::kFp8E4M3:
      put(narrowReciprocal<E4m3Elem>(n));
      break;
    case DataType::kFp8E5M2:
      put(narrowReciprocal<E5m2Elem>(n));
      break;
    default:
      break;  // integer Avg divides instead
  }
  return s;
}

}  // namespace weft
