// Portable scalar kernels: the loops every SIMD level falls back to for what its vector code
// leaves (and that do all the work at the scalar level), and the element-wise helpers with no
// vector code. Every value they compute comes from reduce_elements.h (combine, scale, divide,
// the formats' conversions), the one definition the device interpreter compiles too: these
// files hold loops and dispatch, never an operator's arithmetic.
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
    elements::withOp(r.op, [&](auto op) {
      scalarLoop<E, decltype(op), false, false>(r.dst, r.a, r.b, r.count, none, none);
    });
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
  withElem(t, [&](auto e) {
    using E = decltype(e);
    using S = typename E::Storage;
    for (size_t i = 0; i < count; ++i)
      storeAt<S>(buf, i, elements::divide<E>(loadAt<S>(buf, i), divisor));
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
