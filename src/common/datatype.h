// Element types and reduction operators, numbered exactly like ncclDataType_t / ncclRedOp_t.
#pragma once
#include <cstddef>
#include <cstdint>

namespace weft {

enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
  kFp8E4M3 = 10,
  kFp8E5M2 = 11,
};
inline constexpr int kNumDataTypes = 12;

// Built-in operators. PreMulSum is a sum whose operands read from the user's input are first
// multiplied by a scalar; Avg is lowered by the core (PreMulSum 1/n for floats, Sum then divide
// for integers) and never reaches a kernel.
enum class RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kPreMulSum = 5 };
inline constexpr int kNumBuiltinOps = 5;

// Bytes per element (0 for an invalid type). Inline: every call and kernel asks it.
inline size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2:
      return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}
const char* dataTypeName(DataType t);  // nccl-tests spelling: int8, uint8, int32, ..., half, float,
                                       // double, bfloat16, f8e4m3, f8e5m2
const char* redOpName(RedOp op);       // sum, prod, max, min, avg, premulsum
bool isFloating(DataType t);
bool isValid(DataType t);

// A PreMulSum scalar, stored in the element type's own bytes (8 bytes is enough for all types).
struct Scalar {
  alignas(8) unsigned char bytes[8] = {};
};

}  // namespace weft
