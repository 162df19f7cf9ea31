// The element arithmetic shared by the host's scalar kernels and the CUDA kernels
// (src/common/reduce_elements.h): every type and operator against an independent reference
// (exact arithmetic in double, rounded to the format by searching all its codes), Avg's integer
// division and the map from RedOp to arithmetic, plus the conversions' edge cases as literal bit
// patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/common/reduce_elements.h"

namespace weft::elements {
namespace {

// A narrow float format described by its fields, decoded with ldexp (not with half.h).
struct FormatSpec {
  int bits, expBits, mantBits, bias;
  bool ieeeSpecials;  // all-ones exponent is inf/NaN (fp16, bf16, e5m2); else only S.1111.111 NaN
  bool saturates;     // finite overflow goes to the largest finite value (fp8), else to infinity
};

const FormatSpec kHalf{16, 5, 10, 15, true, false};
const FormatSpec kBf16{16, 8, 7, 127, true, false};
const FormatSpec kE4m3{8, 4, 3, 7, false, true};
const FormatSpec kE5m2{8, 5, 2, 15, true, true};

double decode(const FormatSpec& f, uint32_t code) {
  const bool negative = (code >> (f.bits - 1)) & 1;
  const uint32_t exp = (code >> f.mantBits) & ((1u << f.expBits) - 1);
  const uint32_t mant = code & ((1u << f.mantBits) - 1);
  const uint32_t expMax = (1u << f.expBits) - 1;
  double v;
  if (f.ieeeSpecials && exp == expMax)
    v = mant ? NAN : INFINITY;
  else if (!f.ieeeSpecials && exp == expMax && mant == (1u << f.mantBits) - 1)
    v = NAN;
  else if (exp == 0)
    v = std::ldexp(double(mant), 1 - f.bias - f.mantBits);
  else
    v = std::ldexp(double(mant + (1u << f.mantBits)), int(exp) - f.bias - f.mantBits);
  return negative ? -v : v;
}

// Round to nearest, ties to the even code, by trying every finite code.
uint32_t encodeSearch(const FormatSpec& f, double v) {
  uint32_t best = 0;
  double bestErr = INFINITY, maxFinite = 0;
  uint32_t maxCode = 0;
  for (uint32_t c = 0; c < (1u << f.bits); ++c) {
    const double d = decode(f, c);
    if (!std::isfinite(d)) continue;
    if (d > maxFinite) maxFinite = d, maxCode = c;
    const double err = std::fabs(d - v);
    if (err < bestErr || (err == bestErr && (c & 1) == 0 && std::signbit(d) == std::signbit(v)))
      best = c, bestErr = err;
  }
  // Beyond the largest finite value by half an ulp or more: saturate or overflow.
  const uint32_t sign = std::signbit(v) ? 1u << (f.bits - 1) : 0;
  const double ulp = maxFinite - decode(f, maxCode - 1);
  if (std::fabs(v) >= maxFinite + ulp / 2)
    return sign | (f.saturates ? maxCode : ((1u << f.expBits) - 1) << f.mantBits);
  return best;
}

// encodeSearch, remembered: the grid asks for the same few values many times.
uint32_t encode(const FormatSpec& f, double v) {
  static std::map<std::pair<const FormatSpec*, double>, uint32_t> known;
  auto [it, added] = known.try_emplace({&f, v}, 0);
  if (added) it->second = encodeSearch(f, v);
  return it->second;
}

const FormatSpec* specOf(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return &kHalf;
    case DataType::kBfloat16:
      return &kBf16;
    case DataType::kFp8E4M3:
      return &kE4m3;
    case DataType::kFp8E5M2:
      return &kE5m2;
    default:
      return nullptr;
  }
}

// The storage bits of the exactly computed value v in type t.
template <class E>
typename E::Storage reference(DataType t, double v) {
  using S = typename E::Storage;
  if (const FormatSpec* f = specOf(t)) return static_cast<S>(encode(*f, v));
  if constexpr (std::is_integral_v<S>) {
    // Two's complement wrap-around, as the kernels' unsigned arithmetic does.
    return static_cast<S>(static_cast<std::make_unsigned_t<S>>(static_cast<int64_t>(v)));
  } else {
    return static_cast<S>(v);
  }
}

enum class Case { kSum, kProd, kMax, kMin, kScaleA, kScaleB, kScaleBoth };

std::string caseName(Case c) {
  const char* names[] = {"sum",          "prod",         "max",           "min",
                         "premulsum(a)", "premulsum(b)", "premulsum(a,b)"};
  return names[static_cast<int>(c)];
}

template <class E>
typename E::Storage compute(Case c, typename E::Storage a, typename E::Storage b,
                            typename E::Calc s) {
  switch (c) {
    case Case::kSum:
      return combine<E, OpSum, false, false>(a, b, s, s);
    case Case::kProd:
      return combine<E, OpProd, false, false>(a, b, s, s);
    case Case::kMax:
      return combine<E, OpMax, false, false>(a, b, s, s);
    case Case::kMin:
      return combine<E, OpMin, false, false>(a, b, s, s);
    case Case::kScaleA:
      return combine<E, OpSum, true, false>(a, b, s, s);
    case Case::kScaleB:
      return combine<E, OpSum, false, true>(a, b, s, s);
    case Case::kScaleBoth:
      return combine<E, OpSum, true, true>(a, b, s, s);
  }
  return {};
}

// Exact result with the kernels' rounding points: a scaled operand is rounded before the sum.
template <class E>
double expected(DataType t, Case c, double a, double b, double s) {
  auto rounded = [&](double v) {
    typename E::Storage bits = reference<E>(t, v);
    return static_cast<double>(E::toCalc(bits));
  };
  switch (c) {
    case Case::kSum:
      return a + b;
    case Case::kProd:
      return a * b;
    case Case::kMax:
      return a > b ? a : b;
    case Case::kMin:
      return a < b ? a : b;
    case Case::kScaleA:
      return rounded(a * s) + b;
    case Case::kScaleB:
      return a + rounded(b * s);
    case Case::kScaleBoth:
      return rounded(a * s) + rounded(b * s);
  }
  return 0;
}

TEST(Elements, EveryTypeAndOperatorMatchesTheReference) {
  for (int ti = 0; ti < kNumDataTypes; ++ti) {
    const auto t = static_cast<DataType>(ti);
    ASSERT_TRUE(withElem(t, [&](auto e) {
      using E = decltype(e);
      using S = typename E::Storage;
      const bool isUnsigned = std::is_integral_v<S> && !std::is_signed_v<S>;
      // Values every type holds exactly; results stay within every format's finite range.
      std::vector<double> grid;
      for (int v = isUnsigned ? 0 : -4; v <= (isUnsigned ? 8 : 4); ++v) grid.push_back(v);
      if (!std::is_integral_v<S>) grid.insert(grid.end(), {0.5, -0.75, 1.5, 0.25});
      const double scale = std::is_integral_v<S> ? 3.0 : 1.5;
      const auto s = E::toCalc(reference<E>(t, scale));
      for (int ci = 0; ci <= static_cast<int>(Case::kScaleBoth); ++ci) {
        const auto c = static_cast<Case>(ci);
        for (double a : grid)
          for (double b : grid) {
            const S got = compute<E>(c, reference<E>(t, a), reference<E>(t, b), s);
            const S want = reference<E>(t, expected<E>(t, c, a, b, scale));
            ASSERT_EQ(got, want) << dataTypeName(t) << " " << caseName(c) << " a=" << a
                                 << " b=" << b;
          }
      }
    }));
  }
}

TEST(Elements, IntegersWrapAround) {
  using I8 = IntElem<int8_t>;
  using U8 = IntElem<uint8_t>;
  using I64 = IntElem<int64_t>;
  EXPECT_EQ((combine<I8, OpSum, false, false>(100, 100, 0, 0)), int8_t(-56));
  EXPECT_EQ((combine<U8, OpProd, false, false>(200, 2, 0, 0)), uint8_t(144));
  EXPECT_EQ((combine<I64, OpSum, false, false>(INT64_MAX, 1, 0, 0)), INT64_MIN);
  EXPECT_EQ((combine<I8, OpMin, false, false>(-128, 127, 0, 0)), int8_t(-128));
}

TEST(Elements, MaxAndMinReturnTheNumberBesideANaN) {
  const float nan = NAN;
  using F = FloatElem<float>;
  EXPECT_EQ((combine<F, OpMax, false, false>(nan, 2.0f, 0, 0)), 2.0f);
  EXPECT_EQ((combine<F, OpMin, false, false>(2.0f, nan, 0, 0)), 2.0f);
  const uint16_t halfNan = 0x7E00, halfTwo = 0x4000;
  EXPECT_EQ((combine<HalfElem, OpMax, false, false>(halfNan, halfTwo, 0, 0)), halfTwo);
  EXPECT_EQ((combine<HalfElem, OpMin, false, false>(halfTwo, halfNan, 0, 0)), halfTwo);
}

// Avg's division on the integers: toward zero, in 64 bits of the type's signedness (a divisor
// wider than the type stays what it is); on floats a plain division in the arithmetic type.
TEST(Elements, DivisionRoundsTowardZero) {
  EXPECT_EQ(divide<IntElem<int32_t>>(7, 2), 3);
  EXPECT_EQ(divide<IntElem<int32_t>>(-7, 2), -3);
  EXPECT_EQ(divide<IntElem<int8_t>>(-128, 3), -42);
  EXPECT_EQ(divide<IntElem<uint8_t>>(255, 300), 0);
  EXPECT_EQ(divide<IntElem<uint64_t>>(UINT64_MAX, 2), UINT64_MAX / 2);
  EXPECT_EQ(divide<IntElem<int64_t>>(INT64_MIN, 4), INT64_MIN / 4);
  EXPECT_EQ(divide<FloatElem<float>>(1.0f, 4), 0.25f);
  EXPECT_EQ(divide<HalfElem>(HalfFormat::narrow(3.0f), 2), HalfFormat::narrow(1.5f));
}

// The one map from RedOp to arithmetic: Avg and PreMulSum reduce as sums.
TEST(Elements, EveryOperatorReducesWithItsArithmetic) {
  using F = FloatElem<float>;
  auto applied = [](RedOp op) {
    return withOp(op, [](auto o) { return decltype(o)::template apply<F>(2.0f, 3.0f); });
  };
  EXPECT_EQ(applied(RedOp::kSum), 5.0f);
  EXPECT_EQ(applied(RedOp::kProd), 6.0f);
  EXPECT_EQ(applied(RedOp::kMax), 3.0f);
  EXPECT_EQ(applied(RedOp::kMin), 2.0f);
  EXPECT_EQ(applied(RedOp::kAvg), 5.0f);
  EXPECT_EQ(applied(RedOp::kPreMulSum), 5.0f);
}

TEST(Elements, ConversionEdgeCases) {
  // One, the largest finite values, overflow, the smallest subnormals.
  EXPECT_EQ(HalfFormat::narrow(1.0f), 0x3C00);
  EXPECT_EQ(HalfFormat::narrow(65504.0f), 0x7BFF);
  EXPECT_EQ(HalfFormat::narrow(65520.0f), 0x7C00);  // half an ulp past max rounds to infinity
  EXPECT_EQ(HalfFormat::narrow(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(Bf16Format::narrow(1.0f), 0x3F80);
  EXPECT_EQ(E4m3Format::narrow(1.0f), 0x38);
  EXPECT_EQ(E4m3Format::narrow(448.0f), 0x7E);
  EXPECT_EQ(E4m3Format::narrow(1e6f), 0x7E);       // satfinite
  EXPECT_EQ(E4m3Format::narrow(-INFINITY), 0xFE);  // satfinite, sign kept
  EXPECT_EQ(E4m3Format::narrow(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(E5m2Format::narrow(1.0f), 0x3C);
  EXPECT_EQ(E5m2Format::narrow(57344.0f), 0x7B);
  EXPECT_EQ(E5m2Format::narrow(1e6f), 0x7B);      // finite overflow saturates
  EXPECT_EQ(E5m2Format::narrow(INFINITY), 0x7C);  // infinity stays infinite
  EXPECT_EQ(E5m2Format::narrow(std::ldexp(1.0f, -16)), 0x01);
  // Ties go to the even code.
  uint32_t bits = 0x3F808000u;  // 1 + 2^-8: halfway between bf16 1 and 1 + 2^-7
  float tie;
  std::memcpy(&tie, &bits, sizeof tie);
  EXPECT_EQ(Bf16Format::narrow(tie), 0x3F80);
  EXPECT_EQ(E4m3Format::narrow(17.0f), 0x58);  // between 16 (0x58) and 18 (0x59)
  EXPECT_EQ(E5m2Format::narrow(9.0f), 0x48);   // between 8 (0x48) and 10 (0x49)
  // NaN in, NaN out.
  EXPECT_TRUE(std::isnan(HalfFormat::widen(HalfFormat::narrow(NAN))));
  EXPECT_TRUE(std::isnan(E4m3Format::widen(E4m3Format::narrow(NAN))));
  EXPECT_TRUE(std::isnan(E5m2Format::widen(E5m2Format::narrow(NAN))));
}

// Every code of each narrow format widens to the reference value, and narrowing it back gives
// the same code (NaNs aside).
TEST(Elements, NarrowFormatsRoundTripEveryCode) {
  auto check = [](const FormatSpec& f, auto widen, auto narrow) {
    for (uint32_t c = 0; c < (1u << f.bits); ++c) {
      const double want = decode(f, c);
      const float got = widen(c);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << c;
        continue;
      }
      ASSERT_EQ(double(got), want) << "code " << c;
      ASSERT_EQ(uint32_t(narrow(got)), c) << "code " << c;
    }
  };
  check(kHalf, HalfFormat::widen, HalfFormat::narrow);
  check(kBf16, Bf16Format::widen, Bf16Format::narrow);
  check(kE4m3, E4m3Format::widen, E4m3Format::narrow);
  check(kE5m2, E5m2Format::widen, E5m2Format::narrow);
}

}  // namespace
}  // namespace weft::elements
