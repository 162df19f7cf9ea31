#include "src/common/datatype.h"

namespace weft {

const char* dataTypeName(DataType t) {
  static const char* kNames[kNumDataTypes] = {"int8",   "uint8",    "int32",  "uint32",
                                              "int64",  "uint64",   "half",   "float",
                                              "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return isValid(t) ? kNames[static_cast<int>(t)] : "invalid";
}

const char* redOpName(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return "sum";
    case RedOp::kProd:
      return "prod";
    case RedOp::kMax:
      return "max";
    case RedOp::kMin:
      return "min";
    case RedOp::kAvg:
      return "avg";
    case RedOp::kPreMulSum:
      return "premulsum";
  }
  return "invalid";
}

bool isFloating(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 ||
         t == DataType::kBfloat16 || t == DataType::kFp8E4M3 || t == DataType::kFp8E5M2;
}

bool isValid(DataType t) {
  int v = static_cast<int>(t);
  return v >= 0 && v < kNumDataTypes;
}

}  // namespace weft
