// The reduction kernels on closed-form inputs, per SIMD level and element type: every op at
// every count, offset and aliasing of the destination, with cached and streaming stores, and the
// NaN rule of max and min. Expected values come from the model of reduce_reference.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/unit/common/reduce_reference.h"

namespace weft {
namespace {

using namespace reduce_reference;

// Runs one case of level and type `p` and checks every element against the closed form.
void runCase(const LevelType& p, const Variant& v, size_t n, size_t offset, Alias alias) {
  const DataType t = p.type;
  const size_t size = dataTypeSize(t);
  SCOPED_TRACE(testing::Message() << "op=" << v.name << " n=" << n << " offset=" << offset
                                  << " alias=" << static_cast<int>(alias));
  Buffer a(n * size, offset), b(n * size, offset), d(n * size, offset);
  fillInputs(t, v, n, a.data(), b.data());
  char* dst = alias == Alias::kDstIsA ? a.data() : alias == Alias::kDstIsB ? b.data() : d.data();
  Scalar s = makeScalar(t);
  kernels::reduceWith(p.level, t, v.op, dst, a.data(), v.scaleA, b.data(), v.scaleB, n, &s);
  bool isInt = kindOf(t) == Kind::kSigned || kindOf(t) == Kind::kUnsigned;
  int bad = 0;
  for (size_t i = 0; i < n && bad < 5; ++i) {
    if (isInt) {
      uint64_t got = wrapInt(t, readBits(dst + i * size, size));
      uint64_t want = expectedInt(t, v, i);
      if (got != want) ++bad;
      EXPECT_EQ(got, want) << "element " << i;
    } else {
      double got = readFloat(t, dst + i * size), want = expectedFloat(t, v, i);
      if (got != want) ++bad;
      EXPECT_EQ(got, want) << "element " << i;
    }
  }
  EXPECT_TRUE(a.guardsIntact() && b.guardsIntact() && d.guardsIntact());
}

TEST_P(ReduceTest, ClosedFormAllOpsCountsOffsetsAliases) {
  const size_t size = dataTypeSize(GetParam().type);
  std::vector<size_t> offsets = {0, size, 3 * size};
  if (size > 1) offsets.push_back(1);  // misaligned for the element type
  for (const Variant& v : kVariants)
    for (size_t n : kCounts)
      for (size_t off : offsets)
        for (Alias al : {Alias::kNone, Alias::kDstIsA, Alias::kDstIsB})
          runCase(GetParam(), v, n, off, al);
}

TEST_P(ReduceTest, ClosedFormWithStreamingStores) {
  // Force the non-temporal path (head peeled to 64-byte alignment) at every size.
  size_t saved = kernels::streamMinBytes();
  kernels::setStreamMinBytes(0);
  const size_t size = dataTypeSize(GetParam().type);
  for (const Variant& v : kVariants)
    for (size_t n : kCounts)
      for (size_t off : {size_t{0}, size, 5 * size}) runCase(GetParam(), v, n, off, Alias::kNone);
  kernels::setStreamMinBytes(saved);
}

// fmaxf / fminf rule: a NaN operand yields the other operand; two NaNs give a NaN.
TEST_P(ReduceTest, MaxMinNaNRule) {
  const DataType t = GetParam().type;
  if (!isFloating(t)) return;  // integers have no NaN
  const size_t n = 1003, size = dataTypeSize(t);
  Buffer a(n * size, 0), b(n * size, 0), d(n * size, 0);
  auto writeNaN = [&](char* p) {
    if (t == DataType::kFloat32) {
      float f = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(p, &f, 4);
    } else if (t == DataType::kFloat64) {
      double x = std::numeric_limits<double>::quiet_NaN();
      std::memcpy(p, &x, 8);
    } else {
      writeBits(p, size,
                t == DataType::kFp8E4M3   ? 0x7F
                : t == DataType::kFp8E5M2 ? 0x7E
                : t == DataType::kFloat16 ? 0x7E00
                                          : 0x7FC0);
    }
  };
  for (size_t i = 0; i < n; ++i) {
    double x = static_cast<double>(pattern(i, 0, 9)) - 4,
           y = static_cast<double>(pattern(i, 1, 9)) - 4;
    writeFloat(t, a.data() + i * size, x);
    writeFloat(t, b.data() + i * size, y);
    if (i % 4 == 1 || i % 4 == 3) writeNaN(a.data() + i * size);
    if (i % 4 == 2 || i % 4 == 3) writeNaN(b.data() + i * size);
  }
  for (RedOp op : {RedOp::kMax, RedOp::kMin}) {
    kernels::reduceWith(GetParam().level, t, op, d.data(), a.data(), false, b.data(), false, n,
                        nullptr);
    for (size_t i = 0; i < n; ++i) {
      double x = static_cast<double>(pattern(i, 0, 9)) - 4,
             y = static_cast<double>(pattern(i, 1, 9)) - 4;
      double got = readFloat(t, d.data() + i * size);
      switch (i % 4) {
        case 0:
          ASSERT_EQ(got, op == RedOp::kMax ? std::max(x, y) : std::min(x, y)) << i;
          break;
        case 1:
          ASSERT_EQ(got, y) << i;
          break;
        case 2:
          ASSERT_EQ(got, x) << i;
          break;
        default:
          ASSERT_TRUE(std::isnan(got)) << i;
      }
    }
  }
}

std::vector<LevelType> levelTypeGrid() {
  std::vector<LevelType> v;
  for (SimdLevel l : allLevels())
    for (DataType t : allTypes()) v.push_back({l, t});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, ReduceTest, testing::ValuesIn(levelTypeGrid()),
                         [](const testing::TestParamInfo<LevelType>& info) {
                           return std::string(kernels::simdLevelName(info.param.level)) + "_" +
                                  dataTypeName(info.param.type);
                         });

}  // namespace
}  // namespace weft
