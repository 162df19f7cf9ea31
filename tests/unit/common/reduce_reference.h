// The reduce tests' own model of the element types (reduce_*_test.cc, narrow_float_test.cc).
//
// Expected values come from closed-form inputs whose results are exact in the element type, and
// are checked through this model's own decoder of the formats (refDecode), never through the
// kernel code.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "src/common/datatype.h"
#include "src/common/reduce.h"
#include "src/common/reduce_internal.h"

namespace weft::reduce_reference {

using kernels::SimdLevel;

// ---- Independent model of the formats -------------------------------------------------------

struct Format {
  int expBits;
  int mantBits;
  bool ieee;  // all-ones exponent means inf/NaN (fp16, bf16, e5m2); else only S.1111.111 is NaN
  int bits() const { return 1 + expBits + mantBits; }
  int bias() const { return (1 << (expBits - 1)) - 1; }
};

inline constexpr Format kHalf{5, 10, true};
inline constexpr Format kBf16{8, 7, true};
inline constexpr Format kE4m3{4, 3, false};
inline constexpr Format kE5m2{5, 2, true};

double refDecode(const Format& f, uint32_t code);

// All finite non-negative codes of a format in increasing order, and the inverse map.
struct FormatTable {
  Format f;
  std::vector<std::pair<double, uint32_t>> positive;
  std::map<double, uint32_t> encode;
  uint32_t maxCode = 0;
  double maxValue = 0;

  explicit FormatTable(Format fmt);

  // The code of v, which must be representable (a test failure otherwise).
  uint32_t exact(double v) const;

  // Round to nearest, ties to even code; beyond the range: inf for IEEE formats when the value is
  // at least max + half an ulp, max finite for fp8 (satfinite) unless e5m2 gets an infinity.
  uint32_t round(double x) const;
};

// The table of a narrow floating type (fp16, bf16, fp8 e4m3, fp8 e5m2).
const FormatTable& table(DataType t);

// ---- Element access in the test's own terms -------------------------------------------------

enum class Kind { kSigned, kUnsigned, kFloat, kNarrow };

Kind kindOf(DataType t);

uint64_t readBits(const void* p, size_t size);
void writeBits(void* p, size_t size, uint64_t v);

// Integers: a value is its two's complement bits, sign-extended to 64 for signed types.
uint64_t wrapInt(DataType t, uint64_t x);

// Floating values as doubles (exact for every type here).
double readFloat(DataType t, const void* p);
void writeFloat(DataType t, void* p, double v);

// ---- Closed-form inputs ---------------------------------------------------------------------

// Op variants under test; the PreMulSum ones differ in which operands are scaled.
struct Variant {
  RedOp op;
  bool scaleA, scaleB;
  const char* name;
};
inline constexpr Variant kVariants[] = {
    {RedOp::kSum, false, false, "sum"},          {RedOp::kProd, false, false, "prod"},
    {RedOp::kMax, false, false, "max"},          {RedOp::kMin, false, false, "min"},
    {RedOp::kPreMulSum, true, false, "premulA"}, {RedOp::kPreMulSum, false, true, "premulB"},
    {RedOp::kPreMulSum, true, true, "premulAB"},
};

int64_t pattern(size_t i, int which, int64_t range);

// Integer inputs: a small pattern stretched over the type's width so sums and products wrap.
uint64_t intInput(DataType t, size_t i, int which);

// Floating inputs chosen so that every result of `v` is exact in the type.
double floatInput(DataType t, const Variant& v, size_t i, int which);

// PreMulSum scalar: exact multiplier that keeps results exact.
double floatScalarValue(DataType t);
int64_t intScalarValue(DataType t);
Scalar makeScalar(DataType t);

void fillInputs(DataType t, const Variant& v, size_t n, char* a, char* b);

uint64_t expectedInt(DataType t, const Variant& v, size_t i);
double expectedFloat(DataType t, const Variant& v, size_t i);

// ---- Buffers with guard bytes ---------------------------------------------------------------

inline constexpr unsigned char kGuard = 0xCD;
inline constexpr size_t kPad = 128;

// A 64-byte aligned region with `offset` bytes of slack before the data and guards around it.
struct Buffer {
  std::vector<unsigned char> storage;
  size_t start;
  size_t bytes;
  Buffer(size_t dataBytes, size_t offset);
  char* data() { return reinterpret_cast<char*>(storage.data() + start); }
  bool guardsIntact() const;
};

// ---- Levels, types and sizes ----------------------------------------------------------------

std::vector<SimdLevel> allLevels();
bool supported(SimdLevel l);
std::vector<DataType> allTypes();

inline constexpr size_t kCounts[] = {0, 1, 3, 17, 1000, 4099};
enum class Alias { kNone, kDstIsA, kDstIsB };

// ---- The closed-form checks, per level and type (reduce_ops_test.cc, reduce_scaled_test.cc) --

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
};

}  // namespace weft::reduce_reference
