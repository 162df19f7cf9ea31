// The narrow floating types (fp16, bf16, fp8 e4m3 and e5m2): every code round trips, ties round
// to even, random floats round as the model does, infinities and NaNs, the edges of each format,
// and sums that overflow them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/common/reduce_reference.h"

namespace weft {
namespace {

using namespace reduce_reference;

struct Codec {
  DataType type;
  float (*toFloat)(uint32_t);
  uint32_t (*fromFloat)(float);
};

const Codec kCodecs[] = {
    {DataType::kFloat16, [](uint32_t c) { return halfToFloat(static_cast<uint16_t>(c)); },
     [](float f) -> uint32_t { return floatToHalf(f); }},
    {DataType::kBfloat16, [](uint32_t c) { return bf16ToFloat(static_cast<uint16_t>(c)); },
     [](float f) -> uint32_t { return floatToBf16(f); }},
    {DataType::kFp8E4M3, [](uint32_t c) { return fp8e4m3ToFloat(static_cast<uint8_t>(c)); },
     [](float f) -> uint32_t { return floatToFp8e4m3(f); }},
    {DataType::kFp8E5M2, [](uint32_t c) { return fp8e5m2ToFloat(static_cast<uint8_t>(c)); },
     [](float f) -> uint32_t { return floatToFp8e5m2(f); }},
};

class ConversionTest : public testing::TestWithParam<Codec> {};

// Every code decodes to the reference value and encodes back to itself (NaNs: to a NaN of the
// same sign; their payload may change).
TEST_P(ConversionTest, EveryCodeRoundTrips) {
  const Codec& c = GetParam();
  const FormatTable& tab = table(c.type);
  const uint32_t codes = 1u << tab.f.bits();
  const uint32_t signBit = codes >> 1;
  for (uint32_t code = 0; code < codes; ++code) {
    float f = c.toFloat(code);
    double want = refDecode(tab.f, code);
    uint32_t back = c.fromFloat(f);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << code;
      ASSERT_TRUE(std::isnan(refDecode(tab.f, back))) << code;
      ASSERT_EQ(back & signBit, code & signBit) << code;
    } else {
      ASSERT_EQ(static_cast<double>(f), want) << code;
      ASSERT_EQ(std::signbit(f), (code & signBit) != 0) << code;
      ASSERT_EQ(back, code) << code;
    }
  }
}

// Midpoints between neighbouring codes go to the even code; a hair either side goes to the
// nearer one. Covers subnormals, the normal range and the top of the range.
TEST_P(ConversionTest, TiesRoundToEven) {
  const Codec& c = GetParam();
  const FormatTable& tab = table(c.type);
  for (size_t k = 0; k + 1 < tab.positive.size(); ++k) {
    auto [lo, loCode] = tab.positive[k];
    auto [hi, hiCode] = tab.positive[k + 1];
    float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    uint32_t even = (loCode & 1) == 0 ? loCode : hiCode;
    ASSERT_EQ(c.fromFloat(mid), even) << lo << " .. " << hi;
    ASSERT_EQ(c.fromFloat(std::nextafter(mid, 0.f)), loCode) << lo;
    ASSERT_EQ(c.fromFloat(std::nextafter(mid, INFINITY)), hiCode) << hi;
    uint32_t sign = 1u << (tab.f.bits() - 1);
    ASSERT_EQ(c.fromFloat(-mid), sign | even) << lo;
  }
}

TEST_P(ConversionTest, RandomFloatsMatchReferenceRounding) {
  const Codec& c = GetParam();
  const FormatTable& tab = table(c.type);
  std::mt19937 rng(99);
  std::uniform_real_distribution<double> logMag(-30, 20);
  for (int i = 0; i < 200000; ++i) {
    float f;
    if (i % 2) {
      uint32_t bits = static_cast<uint32_t>(rng());
      std::memcpy(&f, &bits, 4);
    } else {
      f = static_cast<float>(std::exp2(logMag(rng)) * (rng() % 2 ? 1 : -1));
    }
    uint32_t got = c.fromFloat(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(refDecode(tab.f, got)));
      continue;
    }
    ASSERT_EQ(got, tab.round(f)) << std::hexfloat << f;
  }
}

TEST_P(ConversionTest, InfinityAndNaN) {
  const Codec& c = GetParam();
  const FormatTable& tab = table(c.type);
  uint32_t sign = 1u << (tab.f.bits() - 1);
  EXPECT_TRUE(std::isnan(refDecode(tab.f, c.fromFloat(NAN))));
  EXPECT_TRUE(std::isnan(refDecode(tab.f, c.fromFloat(-NAN))));
  EXPECT_NE(c.fromFloat(-NAN) & sign, 0u);
  EXPECT_TRUE(std::isnan(c.toFloat(c.fromFloat(NAN))));
  if (c.type == DataType::kFp8E4M3) {
    EXPECT_EQ(c.fromFloat(INFINITY), 0x7Eu);  // no infinity: saturate
    EXPECT_EQ(c.fromFloat(-INFINITY), 0xFEu);
  } else {
    EXPECT_TRUE(std::isinf(c.toFloat(c.fromFloat(INFINITY))));
    EXPECT_EQ(c.fromFloat(-INFINITY), c.fromFloat(INFINITY) | sign);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ConversionTest, testing::ValuesIn(kCodecs),
                         [](const testing::TestParamInfo<Codec>& info) {
                           return std::string(dataTypeName(info.param.type));
                         });

TEST(ConversionEdgeTest, Half) {
  EXPECT_EQ(floatToHalf(65504.f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.f), 0x7C00);  // overflow to inf, IEEE
  EXPECT_EQ(floatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(floatToHalf(std::ldexp(1.f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.f, -25)), 0x0000);  // tie with zero: even
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.f, -25), 1.f)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.f, -25)), 0x0002);      // 1.5 units: tie, to even 2
  EXPECT_EQ(floatToHalf(std::ldexp(1.f, -14)), 0x0400);      // smallest normal
  EXPECT_EQ(floatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal rounds up to normal
  EXPECT_EQ(floatToHalf(-0.f), 0x8000);
  EXPECT_EQ(floatToHalf(1.f + std::ldexp(1.f, -11)), 0x3C00);  // tie: even
  EXPECT_EQ(floatToHalf(1.f + std::ldexp(3.f, -11)), 0x3C02);  // tie: even (up)
  EXPECT_EQ(halfToFloat(0x3555), 0x1.554p-2f);
  EXPECT_EQ(floatToHalf(std::ldexp(1.f, -100)), 0x0000);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(ConversionEdgeTest, Bf16) {
  EXPECT_EQ(floatToBf16(1.f), 0x3F80);
  EXPECT_EQ(floatToBf16(0x1.01p0f), 0x3F80);                          // tie: even
  EXPECT_EQ(floatToBf16(0x1.03p0f), 0x3F82);                          // tie: even (up)
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(floatToBf16(std::ldexp(1.f, -133)), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(bf16ToFloat(0x0001), std::ldexp(1.f, -133));
  EXPECT_EQ(floatToBf16(-0.f), 0x8000);
}

TEST(ConversionEdgeTest, Fp8Saturates) {
  EXPECT_EQ(floatToFp8e4m3(448.f), 0x7E);
  EXPECT_EQ(floatToFp8e4m3(464.f), 0x7E);  // midpoint to the (absent) next value
  EXPECT_EQ(floatToFp8e4m3(500.f), 0x7E);
  EXPECT_EQ(floatToFp8e4m3(1e30f), 0x7E);
  EXPECT_EQ(floatToFp8e4m3(-1e30f), 0xFE);
  EXPECT_EQ(floatToFp8e4m3(NAN), 0x7F);
  EXPECT_EQ(fp8e4m3ToFloat(0x7E), 448.f);
  EXPECT_EQ(fp8e4m3ToFloat(0x01), std::ldexp(1.f, -9));
  EXPECT_EQ(floatToFp8e4m3(std::ldexp(1.f, -10)), 0x00);  // tie with zero: even
  EXPECT_EQ(floatToFp8e4m3(std::ldexp(3.f, -11)), 0x01);
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0xFF)));
  EXPECT_EQ(fp8e4m3ToFloat(0x78), 256.f);  // exponent 15 is an ordinary binade in E4M3FN

  EXPECT_EQ(floatToFp8e5m2(57344.f), 0x7B);
  EXPECT_EQ(floatToFp8e5m2(61440.f), 0x7B);  // would round to inf: saturate
  EXPECT_EQ(floatToFp8e5m2(1e10f), 0x7B);
  EXPECT_EQ(floatToFp8e5m2(-1e10f), 0xFB);
  EXPECT_EQ(floatToFp8e5m2(INFINITY), 0x7C);  // a real infinity stays infinite
  EXPECT_EQ(fp8e5m2ToFloat(0x7B), 57344.f);
  EXPECT_EQ(fp8e5m2ToFloat(0x01), std::ldexp(1.f, -16));
  EXPECT_TRUE(std::isinf(fp8e5m2ToFloat(0x7C)));
  EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(0x7D)));
}

// Sums that overflow the narrow types: fp16 goes to inf, fp8 saturates.
TEST(ConversionEdgeTest, OverflowingSums) {
  for (SimdLevel l : allLevels()) {
    if (!supported(l)) continue;
    SCOPED_TRACE(kernels::simdLevelName(l));
    std::vector<uint16_t> h(40, 0x7BFF), hd(40);  // 65504 + 65504
    kernels::reduceWith(l, DataType::kFloat16, RedOp::kSum, hd.data(), h.data(), false, h.data(),
                        false, h.size(), nullptr);
    for (uint16_t v : hd) ASSERT_EQ(v, 0x7C00);
    std::vector<uint8_t> e4(40, 0x7E), e5(40, 0x7B), d8(40);
    kernels::reduceWith(l, DataType::kFp8E4M3, RedOp::kSum, d8.data(), e4.data(), false, e4.data(),
                        false, e4.size(), nullptr);
    for (uint8_t v : d8) ASSERT_EQ(v, 0x7E);
    kernels::reduceWith(l, DataType::kFp8E5M2, RedOp::kProd, d8.data(), e5.data(), false, e5.data(),
                        false, e5.size(), nullptr);
    for (uint8_t v : d8) ASSERT_EQ(v, 0x7B);
  }
}

}  // namespace
}  // namespace weft
