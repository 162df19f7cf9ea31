#include "tests/support/values.h"

#include <cmath>

#include "src/common/reduce.h"

namespace weft::test {

size_t typeSize(ncclDataType_t t) { return dataTypeSize(static_cast<DataType>(t)); }
const char* typeName(ncclDataType_t t) { return dataTypeName(static_cast<DataType>(t)); }
const char* opName(int op) {
  return op < ncclNumOps ? redOpName(static_cast<RedOp>(op)) : "premulsum";
}
bool isFloat(ncclDataType_t t) { return isFloating(static_cast<DataType>(t)); }

static bool isFp8(ncclDataType_t t) { return t == ncclFloat8e4m3 || t == ncclFloat8e5m2; }

double inputValue(ncclDataType_t t, int op, int r, uint64_t i) {
  switch (op) {
    case ncclProd:
      // Mostly ones with a few twos: products are powers of two, exact in every type.
      return ((r + i) % 5 == 0) ? 2.0 : 1.0;
    case ncclMax:
    case ncclMin: {
      double v = static_cast<double>((r * 7 + i * 3) % 11);
      return isFp8(t) ? std::min(v, 8.0) : v;
    }
    default:
      // Sums stay tiny for fp8 (exact up to 8 in e5m2), small elsewhere.
      if (isFp8(t)) return ((r + i) % 4 == 0) ? 1.0 : 0.0;
      return static_cast<double>((r + 2 * i) % 3);
  }
}

double expectedReduce(ncclDataType_t t, int op, int n, uint64_t i, double premul) {
  double acc = inputValue(t, op, 0, i);
  for (int r = 1; r < n; ++r) {
    double v = inputValue(t, op, r, i);
    switch (op) {
      case ncclProd:
        acc *= v;
        break;
      case ncclMax:
        acc = std::max(acc, v);
        break;
      case ncclMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
        break;
    }
  }
  if (op == ncclAvg) return isFloat(t) ? acc / n : std::trunc(acc / n);
  if (premul != 0) return acc * premul;
  return acc;
}

void store(ncclDataType_t t, void* buf, uint64_t i, double v) {
  switch (t) {
    case ncclInt8:
      static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v);
      break;
    case ncclUint8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v);
      break;
    case ncclInt32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v);
      break;
    case ncclUint32:
      static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v);
      break;
    case ncclInt64:
      static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v);
      break;
    case ncclUint64:
      static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v);
      break;
    case ncclFloat16:
      static_cast<uint16_t*>(buf)[i] = floatToHalf(static_cast<float>(v));
      break;
    case ncclFloat32:
      static_cast<float*>(buf)[i] = static_cast<float>(v);
      break;
    case ncclFloat64:
      static_cast<double*>(buf)[i] = v;
      break;
    case ncclBfloat16:
      static_cast<uint16_t*>(buf)[i] = floatToBf16(static_cast<float>(v));
      break;
    case ncclFloat8e4m3:
      static_cast<uint8_t*>(buf)[i] = floatToFp8e4m3(static_cast<float>(v));
      break;
    case ncclFloat8e5m2:
      static_cast<uint8_t*>(buf)[i] = floatToFp8e5m2(static_cast<float>(v));
      break;
    default:
      break;
  }
}

double load(ncclDataType_t t, const void* buf, uint64_t i) {
  switch (t) {
    case ncclInt8:
      return static_cast<const int8_t*>(buf)[i];
    case ncclUint8:
      return static_cast<const uint8_t*>(buf)[i];
    case ncclInt32:
      return static_cast<const int32_t*>(buf)[i];
    case ncclUint32:
      return static_cast<const uint32_t*>(buf)[i];
    case ncclInt64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case ncclUint64:
      return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case ncclFloat16:
      return halfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case ncclFloat32:
      return static_cast<const float*>(buf)[i];
    case ncclFloat64:
      return static_cast<const double*>(buf)[i];
    case ncclBfloat16:
      return bf16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case ncclFloat8e4m3:
      return fp8e4m3ToFloat(static_cast<const uint8_t*>(buf)[i]);
    case ncclFloat8e5m2:
      return fp8e5m2ToFloat(static_cast<const uint8_t*>(buf)[i]);
    default:
      return 0;
  }
}

void fill(ncclDataType_t t, int op, int r, void* buf, uint64_t count, uint64_t base) {
  for (uint64_t i = 0; i < count; ++i) store(t, buf, i, inputValue(t, op, r, base + i));
}

uint64_t countWrong(ncclDataType_t t, int op, const void* got, const std::vector<double>& want,
                    int nranks) {
  // Avg on floats multiplies each input by 1/n rounded to the type: allow that rounding.
  double tol = 0;
  if (op == ncclAvg && isFloat(t)) {
    switch (t) {
      case ncclFloat8e4m3:
      case ncclFloat8e5m2:
        tol = 0.26;
        break;
      case ncclFloat16:
      case ncclBfloat16:
        tol = 0.02;
        break;
      default:
        tol = 1e-5;
        break;
    }
  }
  uint64_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = load(t, got, i);
    double w = want[i];
    if (tol == 0 ? g != w : std::fabs(g - w) > tol * std::max(1.0, std::fabs(w))) ++wrong;
  }
  return wrong;
}

}  // namespace weft::test
