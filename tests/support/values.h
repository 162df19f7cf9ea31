// Closed-form test inputs whose reductions are exact in every type and in any order, and the
// expected results computed from the same formulas (never from a second run of Weft).
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "nccl.h"

namespace weft::test {

inline const ncclDataType_t kAllTypes[] = {
    ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
    ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
inline const ncclRedOp_t kAllOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

size_t typeSize(ncclDataType_t t);
const char* typeName(ncclDataType_t t);
const char* opName(int op);  // includes "premulsum" for created ops
bool isFloat(ncclDataType_t t);

// Input element `i` of rank `r` for a reduction with `op` (small integers chosen per type so
// sums and products never round). For non-reductions any exact value works; same formula.
double inputValue(ncclDataType_t t, int op, int r, uint64_t i);
// Expected reduction of element i over ranks [0, n). premul: PreMulSum scalar (0 = none).
double expectedReduce(ncclDataType_t t, int op, int n, uint64_t i, double premul = 0);

// Encoding / decoding one element of type t.
void store(ncclDataType_t t, void* buf, uint64_t i, double v);
double load(ncclDataType_t t, const void* buf, uint64_t i);

// Fills `count` elements of rank r's input (element index offset `base`).
void fill(ncclDataType_t t, int op, int r, void* buf, uint64_t count, uint64_t base = 0);

// Compares; returns the number of mismatches (Avg on floats allows rounding of 1/n).
uint64_t countWrong(ncclDataType_t t, int op, const void* got, const std::vector<double>& want,
                    int nranks);

}  // namespace weft::test
