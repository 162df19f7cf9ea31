// The scaled reductions: average (kAvg) as a sum, PreMulSum's copy with a scalar, the division
// that ends an average, and the reciprocal scalar it multiplies by.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/unit/common/reduce_reference.h"

namespace weft {
namespace {

using namespace reduce_reference;

TEST_P(ReduceTest, KAvgActsAsSum) {
  const DataType t = GetParam().type;
  const size_t n = 1000, size = dataTypeSize(t);
  Buffer a(n * size, 0), b(n * size, 0), d(n * size, 0);
  fillInputs(t, kVariants[0], n, a.data(), b.data());
  kernels::reduceWith(GetParam().level, t, RedOp::kAvg, d.data(), a.data(), false, b.data(), false,
                      n, nullptr);
  std::vector<char> want(n * size);
  kernels::reduceWith(SimdLevel::kScalar, t, RedOp::kSum, want.data(), a.data(), false, b.data(),
                      false, n, nullptr);
  EXPECT_EQ(std::memcmp(d.data(), want.data(), n * size), 0);
}

TEST_P(ReduceTest, CopyWithScalarMatchesClosedForm) {
  const DataType t = GetParam().type;
  const size_t size = dataTypeSize(t);
  const Variant& premul = kVariants[4];
  Scalar s = makeScalar(t);
  bool isInt = kindOf(t) == Kind::kSigned || kindOf(t) == Kind::kUnsigned;
  for (size_t n : kCounts) {
    for (size_t off : {size_t{0}, size, size_t{1}}) {
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " off=" << off << " inPlace=" << inPlace);
        Buffer src(n * size, off), dst(n * size, off), unused(n * size, 0);
        fillInputs(t, premul, n, src.data(), unused.data());
        char* out = inPlace ? src.data() : dst.data();
        kernels::copyElementsWith(GetParam().level, t, out, src.data(), n, &s);
        for (size_t i = 0; i < n; ++i) {
          if (isInt) {
            uint64_t want =
                wrapInt(t, intInput(t, i, 0) * static_cast<uint64_t>(intScalarValue(t)));
            ASSERT_EQ(wrapInt(t, readBits(out + i * size, size)), want) << i;
          } else {
            double want = floatInput(t, premul, i, 0) * floatScalarValue(t);
            ASSERT_EQ(readFloat(t, out + i * size), want) << i;
          }
        }
        EXPECT_TRUE(src.guardsIntact() && dst.guardsIntact());
      }
    }
  }
}

TEST(ReducePublicTest, DivideIntegersTruncatesLikeC) {
  for (DataType t : allTypes()) {
    if (isFloating(t)) continue;
    SCOPED_TRACE(dataTypeName(t));
    const size_t n = 1001, size = dataTypeSize(t);
    for (uint64_t divisor : {uint64_t{1}, uint64_t{3}, uint64_t{7}, uint64_t{200}}) {
      std::vector<char> buf(n * size + 1);
      char* p = buf.data() + 1;  // misaligned on purpose
      for (size_t i = 0; i < n; ++i) writeBits(p + i * size, size, intInput(t, i, 0));
      divideElements(t, p, n, divisor);
      for (size_t i = 0; i < n; ++i) {
        uint64_t x = intInput(t, i, 0), want;
        if (kindOf(t) == Kind::kSigned)
          want = static_cast<uint64_t>(static_cast<int64_t>(x) / static_cast<int64_t>(divisor));
        else
          want = x / divisor;
        ASSERT_EQ(wrapInt(t, readBits(p + i * size, size)), wrapInt(t, want)) << i;
      }
    }
  }
}

TEST(ReducePublicTest, DivideFloatsDivides) {
  std::vector<float> v = {3.f, -9.f, 1.5f};
  divideElements(DataType::kFloat32, v.data(), v.size(), 3);
  EXPECT_EQ(v, (std::vector<float>{1.f, -3.f, 0.5f}));
}

TEST(ReducePublicTest, ReciprocalScalarIsCorrectlyRounded) {
  for (int n = 1; n <= 4096; ++n) {
    Scalar s = reciprocalScalar(DataType::kFloat32, n);
    float f;
    std::memcpy(&f, s.bytes, 4);
    ASSERT_EQ(f, static_cast<float>(1.0 / n)) << n;
    s = reciprocalScalar(DataType::kFloat64, n);
    double d;
    std::memcpy(&d, s.bytes, 8);
    ASSERT_EQ(d, 1.0 / n) << n;
    for (DataType t :
         {DataType::kFloat16, DataType::kBfloat16, DataType::kFp8E4M3, DataType::kFp8E5M2}) {
      s = reciprocalScalar(t, n);
      ASSERT_EQ(readBits(s.bytes, dataTypeSize(t)), table(t).round(1.0 / n))
          << dataTypeName(t) << " n=" << n;
    }
  }
  Scalar zero = reciprocalScalar(DataType::kInt32, 4);
  for (unsigned char c : zero.bytes) EXPECT_EQ(c, 0);
}

}  // namespace
}  // namespace weft
