// Each SIMD level this CPU supports against the scalar kernels on random bit patterns (NaNs,
// infinities, subnormals included), bit for bit (any NaN matches any NaN).
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

class ReduceSimdTest : public testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    if (!supported(GetParam()))
      GTEST_SKIP() << kernels::simdLevelName(GetParam()) << " not supported by this CPU";
  }
};

// Random bytes, biased towards interesting float encodings (zeros, infinities, NaNs, subnormals).
void randomFill(std::mt19937_64& rng, DataType t, char* p, size_t n) {
  size_t size = dataTypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = rng();
    if (isFloating(t) && rng() % 8 == 0) {
      size_t nbits = size * 8;
      uint64_t signBit = uint64_t{1} << (nbits - 1);
      int expBits = t == DataType::kFloat16    ? 5
                    : t == DataType::kBfloat16 ? 8
                    : t == DataType::kFloat32  ? 8
                    : t == DataType::kFloat64  ? 11
                    : t == DataType::kFp8E4M3  ? 4
                                               : 5;
      uint64_t mantMask = (uint64_t{1} << (nbits - 1 - expBits)) - 1;
      uint64_t expMask = ((uint64_t{1} << expBits) - 1) << (nbits - 1 - expBits);
      switch (rng() % 3) {
        case 0:
          bits &= signBit | mantMask;
          break;  // zero / subnormal
        case 1:
          bits |= expMask;
          break;  // inf / NaN
        default:
          bits &= signBit | expMask;
          break;  // zero / inf / power of two
      }
    }
    writeBits(p + i * size, size, bits);
  }
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Bitwise equality, except that any two NaNs are equal: which operand's payload an addition or
// product keeps is up to the compiler (it may commute the operands), in scalar and SIMD code
// alike. On a mismatch, names the first differing element and its inputs.
testing::AssertionResult sameResult(DataType t, const char* got, const char* want, size_t n,
                                    const char* a, const char* b) {
  size_t size = dataTypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(got + i * size, want + i * size, size) == 0) continue;
    if (isFloating(t) && std::isnan(readFloat(t, got + i * size)) &&
        std::isnan(readFloat(t, want + i * size)))
      continue;
    return testing::AssertionFailure()
           << "element " << i << ": a=" << hex(readBits(a + i * size, size))
           << " b=" << hex(readBits(b + i * size, size))
           << " got=" << hex(readBits(got + i * size, size))
           << " want=" << hex(readBits(want + i * size, size));
  }
  return testing::AssertionSuccess();
}

TEST_P(ReduceSimdTest, MatchesScalarBitForBitOnRandomInputs) {
  std::mt19937_64 rng(1234);
  for (DataType t : allTypes()) {
    const size_t size = dataTypeSize(t);
    for (const Variant& v : kVariants) {
      for (size_t n : {size_t{4099}, size_t{77}}) {
        for (size_t off : {size_t{0}, size_t{1}}) {
          for (bool stream : {false, true}) {
            SCOPED_TRACE(testing::Message() << dataTypeName(t) << " " << v.name << " n=" << n
                                            << " off=" << off << " stream=" << stream);
            Buffer a(n * size, off), b(n * size, off), d(n * size, off), ref(n * size, off);
            randomFill(rng, t, a.data(), n);
            randomFill(rng, t, b.data(), n);
            Scalar s;
            randomFill(rng, t, reinterpret_cast<char*>(s.bytes), 1);
            size_t saved = kernels::streamMinBytes();
            kernels::setStreamMinBytes(stream ? 0 : saved);
            kernels::reduceWith(GetParam(), t, v.op, d.data(), a.data(), v.scaleA, b.data(),
                                v.scaleB, n, &s);
            kernels::setStreamMinBytes(saved);
            kernels::reduceWith(SimdLevel::kScalar, t, v.op, ref.data(), a.data(), v.scaleA,
                                b.data(), v.scaleB, n, &s);
            ASSERT_TRUE(sameResult(t, d.data(), ref.data(), n, a.data(), b.data()));
            // Twice: both destinations get the same bits, whether they share an alignment (one
            // vector pass) or not (reduce, then copy).
            for (size_t off2 : {off, off + 3}) {
              Buffer d1(n * size, off), d2(n * size, off2);
              kernels::reduceTwiceWith(GetParam(), t, v.op, d1.data(), d2.data(), a.data(),
                                       v.scaleA, b.data(), v.scaleB, n, &s,
                                       stream ? Store::kStreaming : Store::kCached);
              ASSERT_TRUE(sameResult(t, d1.data(), ref.data(), n, a.data(), b.data()));
              ASSERT_TRUE(sameResult(t, d2.data(), ref.data(), n, a.data(), b.data()));
              ASSERT_TRUE(d1.guardsIntact() && d2.guardsIntact());
            }
            // In place gives the same bits.
            std::vector<char> aCopy(a.data(), a.data() + n * size);
            kernels::reduceWith(GetParam(), t, v.op, a.data(), a.data(), v.scaleA, b.data(),
                                v.scaleB, n, &s);
            ASSERT_TRUE(sameResult(t, a.data(), ref.data(), n, aCopy.data(), b.data()));
            // Copy with a scalar.
            kernels::copyElementsWith(GetParam(), t, d.data(), b.data(), n, &s);
            kernels::copyElementsWith(SimdLevel::kScalar, t, ref.data(), b.data(), n, &s);
            ASSERT_TRUE(sameResult(t, d.data(), ref.data(), n, b.data(),
                                   reinterpret_cast<const char*>(s.bytes)));
            ASSERT_TRUE(d.guardsIntact() && a.guardsIntact());
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, ReduceSimdTest, testing::Values(SimdLevel::kAvx2, SimdLevel::kAvx512),
                         [](const testing::TestParamInfo<SimdLevel>& info) {
                           return std::string(kernels::simdLevelName(info.param));
                         });

}  // namespace
}  // namespace weft
