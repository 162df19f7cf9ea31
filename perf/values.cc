#include "perf/values.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace weft::perf {
namespace {

constexpr double kTwo52 = 4503599627370496.0;  // 2^52: integers stay exact in a double
constexpr int64_t kSumCap = 1000;              // keeps sum-like inputs small and readable

const TypeInfo kTypes[] = {
    {ncclInt8, "int8", 1, false, true, 8, 0, 6},
    {ncclUint8, "uint8", 1, false, false, 8, 0, 7},
    {ncclInt32, "int32", 4, false, true, 32, 0, 30},
    {ncclUint32, "uint32", 4, false, false, 32, 0, 31},
    {ncclInt64, "int64", 8, false, true, 64, 0, 52},
    {ncclUint64, "uint64", 8, false, false, 64, 0, 52},
    {ncclFloat16, "half", 2, true, true, 10, 2048.0, 15},
    {ncclFloat32, "float", 4, true, true, 23, 16777216.0, 60},
    {ncclFloat64, "double", 8, true, true, 52, 9007199254740992.0, 60},
    {ncclBfloat16, "bfloat16", 2, true, true, 7, 256.0, 60},
    {ncclFloat8e4m3, "f8e4m3", 1, true, true, 3, 16.0, 8},
    {ncclFloat8e5m2, "f8e5m2", 1, true, true, 2, 8.0, 15},
};

// A small IEEE-like binary format: sign, expBits exponent bits, mantBits stored mantissa bits.
// hasInf: the all-ones exponent means Inf/NaN (fp16, bf16, e5m2); e4m3 has no Inf and only the
// all-ones code is NaN.
struct MiniFormat {
  int expBits;
  int mantBits;
  bool hasInf;
};
constexpr MiniFormat kHalf{5, 10, true};
constexpr MiniFormat kBf16{8, 7, true};
constexpr MiniFormat kE4m3{4, 3, false};
constexpr MiniFormat kE5m2{5, 2, true};

double decodeMini(const MiniFormat& f, uint32_t code) {
  const int bias = (1 << (f.expBits - 1)) - 1;
  const uint32_t expMask = (1u << f.expBits) - 1, mantMask = (1u << f.mantBits) - 1;
  const bool negative = (code >> (f.expBits + f.mantBits)) & 1;
  const uint32_t e = (code >> f.mantBits) & expMask, m = code & mantMask;
  double v;
  if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - f.mantBits);
  } else if (f.hasInf && e == expMask) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.hasInf && e == expMask && m == mantMask) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << f.mantBits)),
                   static_cast<int>(e) - bias - f.mantBits);
  }
  return negative ? -v : v;
}

// Round to nearest even; overflow saturates to Inf (or the largest finite e4m3 value).
uint32_t encodeMini(const MiniFormat& f, double v) {
  const int bias = (1 << (f.expBits - 1)) - 1;
  const uint32_t expMask = (1u << f.expBits) - 1, mantMask = (1u << f.mantBits) - 1;
  const uint32_t signBit = 1u << (f.expBits + f.mantBits);
  if (std::isnan(v))
    return f.hasInf ? (expMask << f.mantBits) | 1u : (expMask << f.mantBits) | mantMask;
  const uint32_t sign = std::signbit(v) ? signBit : 0;
  double a = std::fabs(v);
  if (a == 0) return sign;
  int e = std::ilogb(a);
  if (e < 1 - bias) e = 1 - bias;  // subnormal range: fixed exponent
  double q = std::nearbyint(std::ldexp(a, f.mantBits - e));
  if (q >= std::ldexp(1.0, f.mantBits + 1)) {
    q /= 2;
    ++e;
  }
  uint32_t mant = static_cast<uint32_t>(q);
  uint32_t expField = mant >> f.mantBits ? static_cast<uint32_t>(e + bias) : 0;
  mant &= mantMask;
  const uint32_t maxExp = f.hasInf ? expMask - 1 : expMask;
  if (expField > maxExp || (!f.hasInf && expField == expMask && mant == mantMask)) {
    if (f.hasInf) return sign | (expMask << f.mantBits);
    return sign | (expMask << f.mantBits) | (mantMask - 1);
  }
  return sign | (expField << f.mantBits) | mant;
}

// Decoding tables: every code of the 8- and 16-bit float formats, built once.
struct DecodeTables {
  std::vector<double> half, bf16;
  double e4m3[256], e5m2[256];
  DecodeTables() : half(65536), bf16(65536) {
    for (uint32_t c = 0; c < 65536; ++c) {
      half[c] = decodeMini(kHalf, c);
      bf16[c] = decodeMini(kBf16, c);
    }
    for (uint32_t c = 0; c < 256; ++c) {
      e4m3[c] = decodeMini(kE4m3, c);
      e5m2[c] = decodeMini(kE5m2, c);
    }
  }
};

const DecodeTables& tables() {
  static const DecodeTables t;
  return t;
}

template <class T>
T at(const void* buf, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void put(void* buf, size_t i, T v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Smallest positive value of a float type (absolute slack for Avg near zero).
double smallestPositive(const TypeInfo& t) {
  switch (t.type) {
    case ncclFloat16:
      return std::ldexp(1.0, -24);
    case ncclBfloat16:
      return std::ldexp(1.0, -133);
    case ncclFloat8e4m3:
      return std::ldexp(1.0, -9);
    case ncclFloat8e5m2:
      return std::ldexp(1.0, -16);
    case ncclFloat32:
      return std::ldexp(1.0, -149);
    default:
      return 0;
  }
}

}  // namespace

const TypeInfo& typeInfo(ncclDataType_t type) {
  for (const TypeInfo& t : kTypes)
    if (t.type == type) return t;
  return kTypes[7];  // unreachable for valid types; float
}

const std::vector<ncclDataType_t>& allTypes() {
  static const std::vector<ncclDataType_t> v = [] {
    std::vector<ncclDataType_t> out;
    for (const TypeInfo& t : kTypes) out.push_back(t.type);
    return out;
  }();
  return v;
}

const std::vector<Op>& allOps() {
  static const std::vector<Op> v = {Op::kSum, Op::kProd, Op::kMax, Op::kMin, Op::kAvg, Op::kMulSum};
  return v;
}

const char* opName(Op op) {
  switch (op) {
    case Op::kSum:
      return "sum";
    case Op::kProd:
      return "prod";
    case Op::kMax:
      return "max";
    case Op::kMin:
      return "min";
    case Op::kAvg:
      return "avg";
    case Op::kMulSum:
      return "mulsum";
    case Op::kNone:
      return "none";
  }
  return "?";
}

bool parseType(const std::string& name, ncclDataType_t* type) {
  static const struct {
    const char* alias;
    ncclDataType_t type;
  } kAliases[] = {
      {"char", ncclInt8},          {"int", ncclInt32},       {"fp16", ncclFloat16},
      {"float16", ncclFloat16},    {"fp32", ncclFloat32},    {"float32", ncclFloat32},
      {"fp64", ncclFloat64},       {"float64", ncclFloat64}, {"bf16", ncclBfloat16},
      {"fp8e4m3", ncclFloat8e4m3}, {"e4m3", ncclFloat8e4m3}, {"fp8e5m2", ncclFloat8e5m2},
      {"e5m2", ncclFloat8e5m2}};
  for (const TypeInfo& t : kTypes)
    if (name == t.name) return *type = t.type, true;
  for (const auto& a : kAliases)
    if (name == a.alias) return *type = a.type, true;
  return false;
}

bool parseOp(const std::string& name, Op* op) {
  for (Op o : allOps())
    if (name == opName(o)) return *op = o, true;
  if (name == "premulsum") return *op = Op::kMulSum, true;
  return false;
}

void storeValue(ncclDataType_t type, void* buf, size_t i, double v) {
  switch (type) {
    case ncclInt8:
      return put<int8_t>(buf, i, static_cast<int8_t>(static_cast<int64_t>(v)));
    case ncclUint8:
      return put<uint8_t>(buf, i, static_cast<uint8_t>(static_cast<uint64_t>(v)));
    case ncclInt32:
      return put<int32_t>(buf, i, static_cast<int32_t>(static_cast<int64_t>(v)));
    case ncclUint32:
      return put<uint32_t>(buf, i, static_cast<uint32_t>(static_cast<uint64_t>(v)));
    case ncclInt64:
      return put<int64_t>(buf, i, static_cast<int64_t>(v));
    case ncclUint64:
      return put<uint64_t>(buf, i, static_cast<uint64_t>(v));
    case ncclFloat16:
      return put<uint16_t>(buf, i, static_cast<uint16_t>(encodeMini(kHalf, v)));
    case ncclFloat32:
      return put<float>(buf, i, static_cast<float>(v));
    case ncclFloat64:
      return put<double>(buf, i, v);
    case ncclBfloat16:
      return put<uint16_t>(buf, i, static_cast<uint16_t>(encodeMini(kBf16, v)));
    case ncclFloat8e4m3:
      return put<uint8_t>(buf, i, static_cast<uint8_t>(encodeMini(kE4m3, v)));
    case ncclFloat8e5m2:
      return put<uint8_t>(buf, i, static_cast<uint8_t>(encodeMini(kE5m2, v)));
    default:
      return;
  }
}

double loadValue(ncclDataType_t type, const void* buf, size_t i) {
  switch (type) {
    case ncclInt8:
      return at<int8_t>(buf, i);
    case ncclUint8:
      return at<uint8_t>(buf, i);
    case ncclInt32:
      return at<int32_t>(buf, i);
    case ncclUint32:
      return at<uint32_t>(buf, i);
    case ncclInt64:
      return static_cast<double>(at<int64_t>(buf, i));
    case ncclUint64:
      return static_cast<double>(at<uint64_t>(buf, i));
    case ncclFloat16:
      return tables().half[at<uint16_t>(buf, i)];
    case ncclFloat32:
      return at<float>(buf, i);
    case ncclFloat64:
      return at<double>(buf, i);
    case ncclBfloat16:
      return tables().bf16[at<uint16_t>(buf, i)];
    case ncclFloat8e4m3:
      return tables().e4m3[at<uint8_t>(buf, i)];
    case ncclFloat8e5m2:
      return tables().e5m2[at<uint8_t>(buf, i)];
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

ValueModel::ValueModel(ncclDataType_t type, Op op, int nranks, uint64_t seed)
    : type_(type),
      op_(op),
      nranks_(std::max(nranks, 1)),
      seed_(mix64(seed + 0x5EEDull)),
      info_(&typeInfo(type)) {
  const TypeInfo& t = *info_;
  const int64_t n = nranks_;
  // Largest magnitude a (partial) result may reach and still be exact.
  double limit;
  if (t.isFloat) {
    limit = t.exactInt;
  } else if (t.bits >= 64) {
    limit = kTwo52;
  } else {
    limit = std::ldexp(1.0, t.isSigned ? t.bits - 1 : t.bits) - 1;
  }
  switch (op) {
    case Op::kSum:
    case Op::kAvg:
    case Op::kMulSum: {
      const int64_t scale = op == Op::kMulSum ? 2 : 1;  // largest PreMulSum scalar
      const double perRank = std::floor(limit / static_cast<double>(n * scale));
      sumSigned_ = t.isFloat || t.isSigned;
      if (perRank >= 1) {
        sumMax_ = static_cast<int64_t>(std::min(perRank, static_cast<double>(kSumCap)));
      } else {
        // More ranks than exact integers: only every period-th rank contributes a 1.
        const int64_t contributors = static_cast<int64_t>(limit) / scale;
        period_ = (n + contributors - 1) / contributors;
      }
      break;
    }
    case Op::kProd:
      // At most maxPow2 factors of 2 per element.
      period_ = std::max<int64_t>(2, (n + t.maxPow2 - 1) / t.maxPow2);
      break;
    case Op::kMax:
    case Op::kMin:
    case Op::kNone:
      if (t.isFloat) {
        hi_ = std::min(t.exactInt, 9007199254740992.0);
        lo_ = -hi_;
      } else if (t.bits >= 64) {
        hi_ = kTwo52;
        lo_ = t.isSigned ? -kTwo52 : 0;
      } else if (t.isSigned) {
        hi_ = std::ldexp(1.0, t.bits - 1) - 1;
        lo_ = -hi_ - 1;
      } else {
        hi_ = std::ldexp(1.0, t.bits) - 1;
        lo_ = 0;
      }
      break;
  }
}

uint64_t ValueModel::hash(int64_t rank, uint64_t index) const {
  return mix64(seed_ + mix64(static_cast<uint64_t>(rank + 2)) + index * 0x9E3779B97F4A7C15ull);
}

double ValueModel::input(int rank, uint64_t index) const {
  switch (op_) {
    case Op::kSum:
    case Op::kAvg:
    case Op::kMulSum: {
      if (sumMax_ == 0) {
        return (hash(-1, index) + static_cast<uint64_t>(rank)) % period_ == 0 ? 1.0 : 0.0;
      }
      const uint64_t h = hash(rank, index);
      if (sumSigned_) {
        return static_cast<double>(static_cast<int64_t>(h % (2 * sumMax_ + 1)) - sumMax_);
      }
      return static_cast<double>(h % (sumMax_ + 1));
    }
    case Op::kProd: {
      const double f = (hash(-1, index) + static_cast<uint64_t>(rank)) % period_ == 0 ? 2.0 : 1.0;
      const bool negative = (info_->isFloat || info_->isSigned) && (hash(rank, index) & 1);
      return negative ? -f : f;
    }
    case Op::kMax:
    case Op::kMin:
    case Op::kNone: {
      const uint64_t range = static_cast<uint64_t>(hi_ - lo_) + 1;
      const int64_t offset = static_cast<int64_t>(hash(rank, index) % range);
      return static_cast<double>(static_cast<int64_t>(lo_) + offset);
    }
  }
  return 0;
}

Expect ValueModel::reduced(uint64_t index) const {
  const int n = nranks_;
  switch (op_) {
    case Op::kSum:
    case Op::kMulSum: {
      double s = 0;
      for (int r = 0; r < n; ++r) s += input(r, index) * (op_ == Op::kMulSum ? premulScalar(r) : 1);
      return {s, 0};
    }
    case Op::kAvg: {
      double s = 0, magnitude = 0;
      for (int r = 0; r < n; ++r) {
        double x = input(r, index);
        s += x;
        magnitude += std::fabs(x);
      }
      if (!info_->isFloat) return {static_cast<double>(static_cast<int64_t>(s) / n), 0};
      // Float Avg multiplies by 1/n rounded to the type: allow that rounding and the rounding
      // of each partial sum (unit roundoff 2^-(mantissa bits + 1) per step).
      const double u = std::ldexp(1.0, -(info_->bits + 1));
      const double tol = (n + 2) * u * magnitude / n + n * smallestPositive(*info_);
      return {s / n, tol};
    }
    case Op::kProd: {
      double p = 1;
      for (int r = 0; r < n; ++r) p *= input(r, index);
      return {p, 0};
    }
    case Op::kMax: {
      double m = input(0, index);
      for (int r = 1; r < n; ++r) m = std::max(m, input(r, index));
      return {m, 0};
    }
    case Op::kMin: {
      double m = input(0, index);
      for (int r = 1; r < n; ++r) m = std::min(m, input(r, index));
      return {m, 0};
    }
    case Op::kNone:
      return {input(0, index), 0};
  }
  return {0, 0};
}

}  // namespace weft::perf
