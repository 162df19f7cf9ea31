// The reduce tests' model of the element types: see reduce_reference.h.
#include "tests/unit/common/reduce_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace weft::reduce_reference {

// ---- Independent model of the formats -------------------------------------------------------

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

FormatTable::FormatTable(Format fmt) : f(fmt) {
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

uint32_t FormatTable::exact(double v) const {
  auto it = encode.find(v);
  EXPECT_NE(it, encode.end()) << v << " is not representable";
  return it == encode.end() ? 0 : it->second;
}

uint32_t FormatTable::round(double x) const {
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

Buffer::Buffer(size_t dataBytes, size_t offset)
    : storage(dataBytes + 3 * kPad, kGuard), bytes(dataBytes) {
  uintptr_t base = reinterpret_cast<uintptr_t>(storage.data());
  start = (64 - base % 64) % 64 + kPad + offset;
}

bool Buffer::guardsIntact() const {
  for (size_t i = 0; i < storage.size(); ++i)
    if ((i < start || i >= start + bytes) && storage[i] != kGuard) return false;
  return true;
}

// ---- Levels, types and sizes ----------------------------------------------------------------

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

}  // namespace weft::reduce_reference
