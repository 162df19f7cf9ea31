// Element types, reduction ops and the closed-form test data of the perf tools.
//
// Every input element is a small integer (or a power of two for products) computed from
// (seed, rank, element index, op). The values are chosen per type and rank count so that every
// partial result of every reduction is exactly representable: the result is the same in any
// reduction order and in every type, fp16, bf16 and fp8 included. Expected results are computed
// from the same formulas, never from a second run of the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace weft::perf {

// What one element type looks like, as far as the tests care.
struct TypeInfo {
  ncclDataType_t type;
  const char* name;  // nccl-tests' spelling
  size_t size;       // bytes per element
  bool isFloat;
  bool isSigned;  // integer types only
  int bits;       // integer width, or stored mantissa bits of a float type
  // Floats: every integer in [-exactInt, exactInt] is representable.
  double exactInt;
  // Largest k with 2^k finite (floats) or 2^k within the positive range (integers), capped.
  int maxPow2;
};

// The ops the tests run; kNone marks a collective that does not reduce.
enum class Op { kSum, kProd, kMax, kMin, kAvg, kMulSum, kNone };

const TypeInfo& typeInfo(ncclDataType_t type);
// All twelve types in nccl-tests' order (int8 ... f8e5m2).
const std::vector<ncclDataType_t>& allTypes();
// sum, prod, max, min, avg, mulsum.
const std::vector<Op>& allOps();
const char* opName(Op op);  // "none" for kNone
// Parses a nccl-tests type / op name; false when unknown.
bool parseType(const std::string& name, ncclDataType_t* type);
bool parseOp(const std::string& name, Op* op);

// Writes / reads element i of a buffer of `type` as a double (exact for every value used here).
void storeValue(ncclDataType_t type, void* buf, size_t i, double v);
double loadValue(ncclDataType_t type, const void* buf, size_t i);

// An expected element: |got - value| <= tol passes (tol is 0 except for Avg on floats).
struct Expect {
  double value;
  double tol;
};

// The closed-form data of one (type, op, rank count, seed).
class ValueModel {
 public:
  ValueModel(ncclDataType_t type, Op op, int nranks, uint64_t seed);

  // Element `index` of rank `rank`'s input.
  double input(int rank, uint64_t index) const;
  // The reduction over all ranks of element `index` (for kNone: rank 0's input).
  Expect reduced(uint64_t index) const;
  // The PreMulSum scalar rank `rank` uses for kMulSum (1 on even ranks, 2 on odd ones).
  static double premulScalar(int rank) { return (rank & 1) ? 2.0 : 1.0; }

  ncclDataType_t type() const { return type_; }
  Op op() const { return op_; }

 private:
  uint64_t hash(int64_t rank, uint64_t index) const;

  ncclDataType_t type_;
  Op op_;
  int nranks_;
  uint64_t seed_;
  const TypeInfo* info_;
  // Sum-like ops: inputs in [-v, v] (or [0, v]), or sparse 0/1 every `period` ranks when v == 0.
  int64_t sumMax_ = 0;
  bool sumSigned_ = false;
  // Prod: factor 2 on every `period_`-th rank, else 1.
  int64_t period_ = 1;
  // Max / Min / None: uniform integers in [lo_, hi_].
  double lo_ = 0, hi_ = 0;
};

// Compares one element; a NaN never matches.
inline bool matches(double got, const Expect& e) {
  if (e.tol == 0) return got == e.value;
  double d = got - e.value;
  return d <= e.tol && -d <= e.tol;
}

}  // namespace weft::perf
