// The host's reduction kernels at every SIMD level against the one definition of the element
// arithmetic (src/common/reduce_elements.h: combine, scale, divide), element by element: every
// type, every operator and PreMulSum variant, over all pairs of edge values (zeros of both signs,
// infinities, NaNs, subnormals, the largest finite values, codes whose sums fall on the narrow
// formats' rounding ties, the integers' extremes). The SIMD loops are separate implementations
// of the same rules; this is what holds them to it. Results must be equal bit for bit, except
// that any NaN matches any NaN (which operand's payload an addition keeps is the compiler's
// choice), never a number.
#include "src/common/reduce_elements.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/common/reduce_reference.h"

namespace weft {
namespace {

using namespace reduce_reference;

class ReduceElementsTest : public testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    if (!supported(GetParam()))
      GTEST_SKIP() << kernels::simdLevelName(GetParam()) << " not supported by this CPU";
  }
};

// Exponent bits of each floating type; 0 for the integers.
int expBitsOf(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return 5;
    case DataType::kBfloat16:
    case DataType::kFloat32:
      return 8;
    case DataType::kFloat64:
      return 11;
    case DataType::kFp8E4M3:
      return 4;
    case DataType::kFp8E5M2:
      return 5;
    default:
      return 0;
  }
}

// Bit patterns worth combining in type t: every code of an 8-bit type; otherwise the edges of
// each field (sign, exponent 0 / 1 / bias / bias + 1 / max - 1 / max, mantissa 0 / 1 / half /
// all ones) and some random codes.
std::vector<uint64_t> edgeCodes(DataType t, std::mt19937_64& rng) {
  const size_t bits = dataTypeSize(t) * 8;
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  std::vector<uint64_t> codes;
  if (bits == 8) {
    for (uint64_t c = 0; c < 256; ++c) codes.push_back(c);
    return codes;
  }
  const int e = expBitsOf(t);
  if (e == 0) {
    const uint64_t top = uint64_t{1} << (bits - 1);
    for (uint64_t c : {uint64_t{0}, uint64_t{1}, uint64_t{2}, top - 1, top - 2, top, top + 1, mask,
                       mask - 1, mask / 3, mask / 5})
      codes.push_back(c & mask);
  } else {
    const int m = static_cast<int>(bits) - 1 - e;
    const uint64_t expMax = (uint64_t{1} << e) - 1, bias = expMax / 2;
    const uint64_t mantMask = (uint64_t{1} << m) - 1;
    for (uint64_t sign : {uint64_t{0}, uint64_t{1}})
      for (uint64_t ex : {uint64_t{0}, uint64_t{1}, bias, bias + 1, expMax - 1, expMax})
        for (uint64_t mant : {uint64_t{0}, uint64_t{1}, uint64_t{1} << (m - 1), mantMask})
          codes.push_back(sign << (bits - 1) | ex << m | mant);
  }
  for (int k = 0; k < 24; ++k) codes.push_back(rng() & mask);
  return codes;
}

bool isNan(DataType t, const char* p) { return isFloating(t) && std::isnan(readFloat(t, p)); }

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The first element where `got` differs from `want` (NaN matching NaN), with its operands.
testing::AssertionResult sameAsElements(DataType t, const char* got, const char* want, size_t n,
                                        const char* a, const char* b) {
  const size_t size = dataTypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    const char* g = got + i * size;
    const char* w = want + i * size;
    if (std::memcmp(g, w, size) == 0 || (isNan(t, g) && isNan(t, w))) continue;
    return testing::AssertionFailure()
           << "element " << i << ": a=" << hex(readBits(a + i * size, size))
           << " b=" << hex(readBits(b + i * size, size)) << " kernel=" << hex(readBits(g, size))
           << " elements::=" << hex(readBits(w, size));
  }
  return testing::AssertionSuccess();
}

// What reduce_elements.h says each element of reduce(v, a, b) is.
void expectedReduce(DataType t, const Variant& v, const Scalar& s, const char* a, const char* b,
                    char* out, size_t n) {
  elements::withElem(t, [&](auto e) {
    using E = decltype(e);
    using S = typename E::Storage;
    S raw;
    std::memcpy(&raw, s.bytes, sizeof raw);
    const typename E::Calc k = E::toCalc(raw);
    elements::withOp(v.op, [&](auto op) {
      using Op = decltype(op);
      for (size_t i = 0; i < n; ++i) {
        S x, y, r;
        std::memcpy(&x, a + i * sizeof(S), sizeof x);
        std::memcpy(&y, b + i * sizeof(S), sizeof y);
        if (v.scaleA && v.scaleB)
          r = elements::combine<E, Op, true, true>(x, y, k, k);
        else if (v.scaleA)
          r = elements::combine<E, Op, true, false>(x, y, k, k);
        else if (v.scaleB)
          r = elements::combine<E, Op, false, true>(x, y, k, k);
        else
          r = elements::combine<E, Op, false, false>(x, y, k, k);
        std::memcpy(out + i * sizeof(S), &r, sizeof r);
      }
    });
  });
}

void expectedScale(DataType t, const Scalar& s, const char* src, char* out, size_t n) {
  elements::withElem(t, [&](auto e) {
    using E = decltype(e);
    using S = typename E::Storage;
    S raw;
    std::memcpy(&raw, s.bytes, sizeof raw);
    for (size_t i = 0; i < n; ++i) {
      S x;
      std::memcpy(&x, src + i * sizeof(S), sizeof x);
      const S r = elements::scale<E>(x, E::toCalc(raw));
      std::memcpy(out + i * sizeof(S), &r, sizeof r);
    }
  });
}

TEST_P(ReduceElementsTest, EveryTypeAndOperatorOnEdgeValues) {
  std::mt19937_64 rng(99);
  for (DataType t : allTypes()) {
    const size_t size = dataTypeSize(t);
    const std::vector<uint64_t> codes = edgeCodes(t, rng);
    const size_t k = codes.size();
    // Every ordered pair, then the same pairs shifted past the vector loops' tail, so that each
    // pair meets the vector body at least once.
    const size_t shift = 97;
    const size_t n = k * k + shift;
    Buffer a(n * size, 0), b(n * size, 0), got(n * size, 0), want(n * size, 0);
    for (size_t i = 0; i < n; ++i) {
      const size_t p = (i + shift) % (k * k);
      writeBits(a.data() + i * size, size, codes[p / k]);
      writeBits(b.data() + i * size, size, codes[p % k]);
    }
    // Scalars: one, a fraction, a large value, a negative zero, an infinity, a NaN, random.
    std::vector<uint64_t> scalars;
    for (size_t c : {size_t{0}, k / 3, k / 2, k - 1}) scalars.push_back(codes[c]);
    for (const Variant& v : kVariants) {
      const bool scaled = v.scaleA || v.scaleB;
      for (size_t si = 0; si < (scaled ? scalars.size() : 1); ++si) {
        Scalar s;
        writeBits(s.bytes, size, scalars[si]);
        SCOPED_TRACE(testing::Message()
                     << dataTypeName(t) << " " << v.name << " scalar " << hex(scalars[si]));
        expectedReduce(t, v, s, a.data(), b.data(), want.data(), n);
        kernels::reduceWith(GetParam(), t, v.op, got.data(), a.data(), v.scaleA, b.data(), v.scaleB,
                            n, &s);
        ASSERT_TRUE(sameAsElements(t, got.data(), want.data(), n, a.data(), b.data()));
        for (Store store : {Store::kCached, Store::kStreaming}) {
          Buffer d2(n * size, 0);
          kernels::reduceTwiceWith(GetParam(), t, v.op, got.data(), d2.data(), a.data(), v.scaleA,
                                   b.data(), v.scaleB, n, &s, store);
          ASSERT_TRUE(sameAsElements(t, got.data(), want.data(), n, a.data(), b.data()));
          ASSERT_TRUE(sameAsElements(t, d2.data(), want.data(), n, a.data(), b.data()));
        }
        if (!scaled) continue;
        expectedScale(t, s, b.data(), want.data(), n);
        kernels::copyElementsWith(GetParam(), t, got.data(), b.data(), n, &s);
        ASSERT_TRUE(sameAsElements(t, got.data(), want.data(), n, b.data(), b.data()));
      }
    }
  }
}

// Avg's integer division (divideElements) is elements::divide: rounding toward zero, the
// divisor taken at 64 bits.
TEST(ReduceElements, DivisionIsTheElementDefinition) {
  std::mt19937_64 rng(7);
  for (DataType t : allTypes()) {
    const size_t size = dataTypeSize(t);
    const std::vector<uint64_t> codes = edgeCodes(t, rng);
    for (uint64_t divisor : {uint64_t{2}, uint64_t{3}, uint64_t{7}, uint64_t{300}}) {
      std::vector<char> got(codes.size() * size), want(codes.size() * size);
      for (size_t i = 0; i < codes.size(); ++i) writeBits(got.data() + i * size, size, codes[i]);
      want = got;
      const std::vector<char> in = got;
      divideElements(t, got.data(), codes.size(), divisor);
      elements::withElem(t, [&](auto e) {
        using E = decltype(e);
        using S = typename E::Storage;
        for (size_t i = 0; i < codes.size(); ++i) {
          S x;
          std::memcpy(&x, want.data() + i * size, size);
          const S r = elements::divide<E>(x, divisor);
          std::memcpy(want.data() + i * size, &r, size);
        }
      });
      ASSERT_TRUE(sameAsElements(t, got.data(), want.data(), codes.size(), in.data(), in.data()))
          << dataTypeName(t) << " / " << divisor;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, ReduceElementsTest,
                         testing::Values(SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512),
                         [](const testing::TestParamInfo<SimdLevel>& info) {
                           return std::string(kernels::simdLevelName(info.param));
                         });

}  // namespace
}  // namespace weft
