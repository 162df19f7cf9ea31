// Reduction / copy kernels and the narrow-float conversions.
//
// Expected values come from closed-form inputs whose results are exact in the element type, and
// are checked through this file's own decoder of the formats (refDecode), never through the kernel
// code. Each SIMD level this CPU supports is checked against the same formulas, then against the
// scalar kernels on random bit patterns (NaNs, infinities, subnormals included), bit for bit
// (any NaN matches any NaN).
#include "src/common/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "src/common/datatype.h"
#include "src/common/reduce_internal.h"

namespace weft {
namespace {

using kernels::SimdLevel;

// ---- Independent model of the formats -------------------------------------------------------

struct Format {
  int expBits;
  int mantBits;
  bool ieee;  // all-ones exponent means inf/NaN (fp16, bf16, e5m2); else only S.1111.111 is NaN
  int bits() const { return 1 + expBits + mantBits; }
  int bias() const { return (1 << (expBits - 1)) - 1; }
};

constexpr Format kHalf{5, 10, true};
constexpr Format kBf16{8, 7, true};
constexpr Format kE4m3{4, 3, false};
constexpr Format kE5m2{5, 2, true};

double refDecode(const Format& f, uint32_t code) {
  uint32_t sign = (code >> (f.expBits + f.mantBits)) & 1;
  uint32_t e = (code >> f.mantBits) & ((1u << f.expBits) - 1);
  uint32_t m = code & ((1u << f.mantBits) - 1);
  uint32_t eMax = (1u << f.expBits) - 1, mMax = (1u << f.mantBits) - 1;
  double v;
  if (f.ieee && e == eMax)
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (!f.ieee && e == eMax && m == mMax)
    v = std::numeric_limits<double>::quiet_NaN();
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - f.bias() - f.mantBits);
  else
    v = std::ldexp(static_cast<double>(m | (1u << f.mantBits)),
                   static_cast<int>(e) - f.bias() - f.mantBits);
  return sign ? -v : v;
}

// All finite non-negative codes of a format in increasing order, and the inverse map.
struct FormatTable {
  Format f;
  std::vector<std::pair<double, uint32_t>> positive;
  std::map<double, uint32_t> encode;
  uint32_t maxCode = 0;
  double maxValue = 0;

  explicit FormatTable(Format fmt) : f(fmt) {
    uint32_t signBit = 1u << (f.bits() - 1);
    for (uint32_t c = 0; c < signBit; ++c) {
      double v = refDecode(f, c);
      if (!std::isfinite(v)) continue;
      positive.emplace_back(v, c);
      encode[v] = c;
      if (v > maxValue) maxValue = v, maxCode = c;
    }
    for (uint32_t c = signBit + 1; c < 2 * signBit; ++c) {
      double v = refDecode(f, c);
      if (std::isfinite(v)) encode[v] = c;
    }
  }

  uint32_t exact(double v) const {
    auto it = encode.find(v);
    EXPECT_NE(it, encode.end()) << v << " is not representable";
    return it == encode.end() ? 0 : it->second;
  }

  // Round to nearest, ties to even code; beyond the range: inf for IEEE formats when the value is
  // at least max + half an ulp, max finite for fp8 (satfinite) unless e5m2 gets an infinity.
  uint32_t round(double x) const {
    uint32_t sign = std::signbit(x) ? 1u << (f.bits() - 1) : 0;
    if (std::isnan(x)) return ~0u;
    double ax = std::fabs(x);
    bool saturating = f.bits() == 8;
    uint32_t infCode = ((1u << f.expBits) - 1) << f.mantBits;
    if (std::isinf(ax)) return sign | (f.ieee ? infCode : maxCode);
    double ulpAtMax =
        std::ldexp(1.0, (static_cast<int>(maxCode >> f.mantBits) - f.bias()) - f.mantBits);
    if (ax >= maxValue + ulpAtMax / 2) return sign | (saturating ? maxCode : infCode);
    auto hi = std::lower_bound(positive.begin(), positive.end(), std::make_pair(ax, 0u));
    if (hi == positive.end()) return sign | maxCode;
    if (hi->first == ax || hi == positive.begin()) return sign | hi->second;
    auto lo = hi - 1;
    double dLo = ax - lo->first, dHi = hi->first - ax;
    if (dLo < dHi) return sign | lo->second;
    if (dHi < dLo) return sign | hi->second;
    return sign | ((lo->second & 1) == 0 ? lo->second : hi->second);
  }
};

const FormatTable& table(DataType t) {
  static const FormatTable kH(kHalf), kB(kBf16), kE4(kE4m3), kE5(kE5m2);
  switch (t) {
    case DataType::kFloat16:
      return kH;
    case DataType::kBfloat16:
      return kB;
    case DataType::kFp8E4M3:
      return kE4;
    default:
      return kE5;
  }
}

// ---- Element access in the test's own terms -------------------------------------------------

enum class Kind { kSigned, kUnsigned, kFloat, kNarrow };

Kind kindOf(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kInt32:
    case DataType::kInt64:
      return Kind::kSigned;
    case DataType::kUint8:
    case DataType::kUint32:
    case DataType::kUint64:
      return Kind::kUnsigned;
    case DataType::kFloat32:
    case DataType::kFloat64:
      return Kind::kFloat;
    default:
      return Kind::kNarrow;
  }
}

uint64_t readBits(const void* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);
  return v;
}

void writeBits(void* p, size_t size, uint64_t v) { std::memcpy(p, &v, size); }

// Integers: a value is its two's complement bits, sign-extended to 64 for signed types.
uint64_t wrapInt(DataType t, uint64_t x) {
  size_t bits = dataTypeSize(t) * 8;
  if (bits == 64) return x;
  x &= (uint64_t{1} << bits) - 1;
  if (kindOf(t) == Kind::kSigned && (x >> (bits - 1))) x |= ~uint64_t{0} << bits;
  return x;
}

// Floating values as doubles (exact for every type here).
double readFloat(DataType t, const void* p) {
  if (t == DataType::kFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (t == DataType::kFloat64) {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  return refDecode(table(t).f, static_cast<uint32_t>(readBits(p, dataTypeSize(t))));
}

void writeFloat(DataType t, void* p, double v) {
  if (t == DataType::kFloat32) {
    float f = static_cast<float>(v);
    EXPECT_EQ(static_cast<double>(f), v);
    std::memcpy(p, &f, 4);
  } else if (t == DataType::kFloat64) {
    std::memcpy(p, &v, 8);
  } else {
    writeBits(p, dataTypeSize(t), table(t).exact(v));
  }
}

// ---- Closed-form inputs ---------------------------------------------------------------------

// Op variants under test; the PreMulSum ones differ in which operands are scaled.
struct Variant {
  RedOp op;
  bool scaleA, scaleB;
  const char* name;
};
constexpr Variant kVariants[] = {
    {RedOp::kSum, false, false, "sum"},          {RedOp::kProd, false, false, "prod"},
    {RedOp::kMax, false, false, "max"},          {RedOp::kMin, false, false, "min"},
    {RedOp::kPreMulSum, true, false, "premulA"}, {RedOp::kPreMulSum, false, true, "premulB"},
    {RedOp::kPreMulSum, true, true, "premulAB"},
};

int64_t pattern(size_t i, int which, int64_t range) {
  uint64_t mul = which ? 53 : 37, add = which ? 7 : 11;
  return static_cast<int64_t>((i * mul + add) % static_cast<uint64_t>(range));
}

// Integer inputs: a small pattern stretched over the type's width so sums and products wrap.
uint64_t intInput(DataType t, size_t i, int which) {
  size_t bits = dataTypeSize(t) * 8;
  uint64_t k = bits == 8 ? 1 : bits == 32 ? (uint64_t{1} << 24) - 3 : (uint64_t{1} << 56) - 3;
  if (kindOf(t) == Kind::kSigned) return static_cast<uint64_t>((pattern(i, which, 201) - 100)) * k;
  return static_cast<uint64_t>(pattern(i, which, 201)) * k;
}

// Floating inputs chosen so that every result of `v` is exact in the type (see each line).
double floatInput(DataType t, const Variant& v, size_t i, int which) {
  bool small = v.op != RedOp::kSum && v.op != RedOp::kMax && v.op != RedOp::kMin;
  int64_t range;
  double step;
  switch (t) {
    case DataType::kFloat16:  // +-25 or +-4 in quarters: <= 11 significant bits after any op
      range = small ? 33 : 201, step = 0.25;
      break;
    case DataType::kBfloat16:  // +-32 or +-4 in halves: <= 8 significant bits
      range = small ? 17 : 129, step = 0.5;
      break;
    case DataType::kFp8E4M3:  // integers +-8 / +-4: results are integers <= 16
      range = small ? 9 : 17, step = 1;
      break;
    case DataType::kFp8E5M2:  // integers +-4 / +-2: results are integers <= 8
      range = small ? 5 : 9, step = 1;
      break;
    default:
      range = 201, step = 0.25;
  }
  return static_cast<double>(pattern(i, which, range) - range / 2) * step;
}

// PreMulSum scalar: exact multiplier that keeps results exact.
double floatScalarValue(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 ? 0.5 : 2.0;
}
int64_t intScalarValue(DataType t) { return kindOf(t) == Kind::kSigned ? -3 : 3; }

Scalar makeScalar(DataType t) {
  Scalar s;
  if (kindOf(t) == Kind::kSigned || kindOf(t) == Kind::kUnsigned)
    writeBits(s.bytes, dataTypeSize(t), static_cast<uint64_t>(intScalarValue(t)));
  else
    writeFloat(t, s.bytes, floatScalarValue(t));
  return s;
}

void fillInputs(DataType t, const Variant& v, size_t n, char* a, char* b) {
  size_t size = dataTypeSize(t);
  bool isInt = kindOf(t) == Kind::kSigned || kindOf(t) == Kind::kUnsigned;
  for (size_t i = 0; i < n; ++i) {
    if (isInt) {
      writeBits(a + i * size, size, intInput(t, i, 0));
      writeBits(b + i * size, size, intInput(t, i, 1));
    } else {
      writeFloat(t, a + i * size, floatInput(t, v, i, 0));
      writeFloat(t, b + i * size, floatInput(t, v, i, 1));
    }
  }
}

uint64_t expectedInt(DataType t, const Variant& v, size_t i) {
  uint64_t x = intInput(t, i, 0), y = intInput(t, i, 1);
  uint64_t s = static_cast<uint64_t>(intScalarValue(t));
  bool isSigned = kindOf(t) == Kind::kSigned;
  auto less = [&](uint64_t p, uint64_t q) {
    return isSigned ? static_cast<int64_t>(p) < static_cast<int64_t>(q) : p < q;
  };
  switch (v.op) {
    case RedOp::kProd:
      return wrapInt(t, x * y);
    case RedOp::kMax:
      return less(x, y) ? y : x;
    case RedOp::kMin:
      return less(x, y) ? x : y;
    case RedOp::kPreMulSum:
      return wrapInt(t, (v.scaleA ? wrapInt(t, x * s) : x) + (v.scaleB ? wrapInt(t, y * s) : y));
    default:
      return wrapInt(t, x + y);
  }
}

double expectedFloat(DataType t, const Variant& v, size_t i) {
  double x = floatInput(t, v, i, 0), y = floatInput(t, v, i, 1), s = floatScalarValue(t);
  switch (v.op) {
    case RedOp::kProd:
      return x * y;
    case RedOp::kMax:
      return std::max(x, y);
    case RedOp::kMin:
      return std::min(x, y);
    case RedOp::kPreMulSum:
      return (v.scaleA ? x * s : x) + (v.scaleB ? y * s : y);
    default:
      return x + y;
  }
}

// ---- Buffers with guard bytes ---------------------------------------------------------------

constexpr unsigned char kGuard = 0xCD;
constexpr size_t kPad = 128;

// A 64-byte aligned region with `offset` bytes of slack before the data and guards around it.
struct Buffer {
  std::vector<unsigned char> storage;
  size_t start;
  size_t bytes;
  Buffer(size_t dataBytes, size_t offset)
      : storage(dataBytes + 3 * kPad, kGuard), bytes(dataBytes) {
    uintptr_t base = reinterpret_cast<uintptr_t>(storage.data());
    start = (64 - base % 64) % 64 + kPad + offset;
  }
  char* data() { return reinterpret_cast<char*>(storage.data() + start); }
  bool guardsIntact() const {
    for (size_t i = 0; i < storage.size(); ++i)
      if ((i < start || i >= start + bytes) && storage[i] != kGuard) return false;
    return true;
  }
};

std::vector<SimdLevel> allLevels() {
  return {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512};
}

bool supported(SimdLevel l) {
  return static_cast<int>(l) <= static_cast<int>(kernels::cpuSimdLevel());
}

std::vector<DataType> allTypes() {
  std::vector<DataType> v;
  for (int i = 0; i < kNumDataTypes; ++i) v.push_back(static_cast<DataType>(i));
  return v;
}

constexpr size_t kCounts[] = {0, 1, 3, 17, 1000, 4099};
enum class Alias { kNone, kDstIsA, kDstIsB };

// ---- Closed-form checks, per level and type -------------------------------------------------

struct LevelType {
  SimdLevel level;
  DataType type;
};

class ReduceTest : public testing::TestWithParam<LevelType> {
 protected:
  void SetUp() override {
    if (!supported(GetParam().level))
      GTEST_SKIP() << kernels::simdLevelName(GetParam().level) << " not supported by this CPU";
  }

  // Runs one case and checks every element against the closed form.
  void runCase(const Variant& v, size_t n, size_t offset, Alias alias) {
    const DataType t = GetParam().type;
    const size_t size = dataTypeSize(t);
    SCOPED_TRACE(testing::Message() << "op=" << v.name << " n=" << n << " offset=" << offset
                                    << " alias=" << static_cast<int>(alias));
    Buffer a(n * size, offset), b(n * size, offset), d(n * size, offset);
    fillInputs(t, v, n, a.data(), b.data());
    char* dst = alias == Alias::kDstIsA ? a.data() : alias == Alias::kDstIsB ? b.data() : d.data();
    Scalar s = makeScalar(t);
    kernels::reduceWith(GetParam().level, t, v.op, dst, a.data(), v.scaleA, b.data(), v.scaleB, n,
                        &s);
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
};

TEST_P(ReduceTest, ClosedFormAllOpsCountsOffsetsAliases) {
  const size_t size = dataTypeSize(GetParam().type);
  std::vector<size_t> offsets = {0, size, 3 * size};
  if (size > 1) offsets.push_back(1);  // misaligned for the element type
  for (const Variant& v : kVariants)
    for (size_t n : kCounts)
      for (size_t off : offsets)
        for (Alias al : {Alias::kNone, Alias::kDstIsA, Alias::kDstIsB}) runCase(v, n, off, al);
}

TEST_P(ReduceTest, ClosedFormWithStreamingStores) {
  // Force the non-temporal path (head peeled to 64-byte alignment) at every size.
  size_t saved = kernels::streamMinBytes();
  kernels::setStreamMinBytes(0);
  const size_t size = dataTypeSize(GetParam().type);
  for (const Variant& v : kVariants)
    for (size_t n : kCounts)
      for (size_t off : {size_t{0}, size, 5 * size}) runCase(v, n, off, Alias::kNone);
  kernels::setStreamMinBytes(saved);
}

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

// ---- SIMD against scalar on random bits -----------------------------------------------------

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

// ---- Public entry points --------------------------------------------------------------------

TEST(ReducePublicTest, SimdLevelNamesTheActiveLevel) {
  std::string name = simdLevel();
  EXPECT_TRUE(name == "scalar" || name == "avx2" || name == "avx512") << name;
  EXPECT_EQ(name, kernels::simdLevelName(kernels::activeSimdLevel()));
  EXPECT_LE(static_cast<int>(kernels::activeSimdLevel()),
            static_cast<int>(kernels::cpuSimdLevel()));
}

TEST(ReducePublicTest, ReduceUsesActiveLevel) {
  const size_t n = 4099;
  std::vector<float> a(n), b(n), d(n);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<float>(i), b[i] = 0.5f * static_cast<float>(i);
  reduce(DataType::kFloat32, RedOp::kSum, d.data(), a.data(), false, b.data(), false, n, nullptr);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], 1.5f * static_cast<float>(i));
  reduce(DataType::kFloat32, RedOp::kSum, d.data(), a.data(), false, b.data(), false, 0, nullptr);
}

TEST(ReducePublicTest, CopyWithoutScalarIsMemcpy) {
  std::vector<unsigned char> src(1001), dst(1001, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7);
  copyElements(DataType::kInt32, dst.data() + 1, src.data() + 1, 250, nullptr);
  EXPECT_EQ(dst[0], 0);
  EXPECT_EQ(std::memcmp(dst.data() + 1, src.data() + 1, 1000), 0);
  copyElements(DataType::kInt32, src.data(), src.data(), 250, nullptr);  // dst == src
  copyElements(DataType::kFloat64, dst.data(), src.data(), 0, nullptr);
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(src[i], static_cast<unsigned char>(i * 7));
}

TEST(ReducePublicTest, StreamingCopyMatchesMemcpyAtEveryAlignment) {
  // Lengths around the 64-byte lines and the 128-byte unrolled body, destinations at every
  // offset within a line (the head up to a line boundary is copied plainly).
  std::vector<unsigned char> src(4096 + 256), dst(4096 + 256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 13 + 5);
  for (size_t len : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65), size_t(127),
                     size_t(128), size_t(129), size_t(1000), size_t(4096)})
    for (size_t dOff = 0; dOff < 64; dOff += 7)
      for (size_t sOff : {size_t(0), size_t(3)}) {
        std::fill(dst.begin(), dst.end(), 0xee);
        copyElements(DataType::kUint8, dst.data() + dOff, src.data() + sOff, len, nullptr,
                     Store::kStreaming);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= dOff && i < dOff + len;
          ASSERT_EQ(dst[i], inside ? src[i - dOff + sOff] : 0xee)
              << "len " << len << " dst offset " << dOff << " src offset " << sOff << " byte " << i;
        }
      }
  // Overlapping regions fall back to memmove.
  std::vector<unsigned char> buf(src.begin(), src.begin() + 1024);
  copyElements(DataType::kUint8, buf.data() + 64, buf.data(), 512, nullptr, Store::kStreaming);
  for (size_t i = 0; i < 512; ++i) ASSERT_EQ(buf[64 + i], src[i]);
}

TEST(ReducePublicTest, SmallCopiesMatchMemmoveAtEveryLengthAndOverlap) {
  // Up to 64 bytes copy inline: every length, both directions of overlap, and apart.
  std::vector<unsigned char> pattern(256);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 29 + 3);
  for (size_t len = 0; len <= 66; ++len)
    for (long shift : {-9L, -1L, 0L, 1L, 8L, 33L, 100L}) {
      std::vector<unsigned char> got(pattern), want(pattern);
      const size_t from = 80, to = static_cast<size_t>(80 + shift);
      copyElements(DataType::kUint8, got.data() + to, got.data() + from, len, nullptr,
                   Store::kCached);
      std::memmove(want.data() + to, want.data() + from, len);
      ASSERT_EQ(got, want) << "len " << len << " shift " << shift;
    }
  // Typed counts: 3 floats are 12 bytes.
  const float in[3] = {1.5f, -2.0f, 3.25f};
  float out[3] = {};
  copyElements(DataType::kFloat32, out, in, 3, nullptr, Store::kStreaming);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], in[i]);
}

TEST(ReducePublicTest, StreamingReduceMatchesCached) {
  const size_t n = 10007;
  std::vector<float> a(n), b(n), cached(n + 16), streamed(n + 16);
  for (size_t i = 0; i < n; ++i)
    a[i] = static_cast<float>(i % 251), b[i] = static_cast<float>(i % 97);
  for (size_t off : {size_t(0), size_t(1), size_t(5)}) {
    reduce(DataType::kFloat32, RedOp::kSum, cached.data() + off, a.data(), false, b.data(), false,
           n, nullptr);
    reduce(DataType::kFloat32, RedOp::kSum, streamed.data() + off, a.data(), false, b.data(), false,
           n, nullptr, Store::kStreaming);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(streamed[off + i], cached[off + i]) << i;
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

// ---- Conversions ----------------------------------------------------------------------------

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
