// What a perf tool (all_reduce_perf & co.) tells the shared driver about its collective: the
// call, its buffer sizes, its bandwidth factors and its data. Each tool is one small file that
// describes its collective with a Collective and calls perfMain (perf/perf_main.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl.h"
#include "perf/roofline.h"
#include "perf/values.h"

namespace weft::perf {

// Element counts of one call, derived from the element count a size gives.
struct CollCounts {
  size_t send = 0;               // elements of each rank's send buffer
  size_t recv = 0;               // elements of each rank's receive buffer
  size_t param = 0;              // the count argument of the call
  size_t sendInPlaceOffset = 0;  // in place: sendbuff = recvbuff + rank * this
  size_t recvInPlaceOffset = 0;  // in place: recvbuff = recvbuff + rank * this
};

class Collective;

// What a collective's data functions see for one rank and one call.
class DataView {
 public:
  int rank = 0;
  int nranks = 1;
  int root = -1;
  size_t count = 0;  // the count argument
  bool inPlace = false;

  // Element `index` of rank r's input (closed form).
  double input(int r, uint64_t index) const { return values_->input(r, index); }
  // Reduction over all ranks of element `index`.
  Expect reduced(uint64_t index) const { return values_->reduced(index); }
  // Element k of this rank's receive region as it was before the call (zero, or this rank's
  // own input where the in-place send region overlaps it).
  Expect unchanged(size_t k) const;

 private:
  friend class Driver;
  const ValueModel* values_ = nullptr;
  const Collective* coll_ = nullptr;
  int64_t sendStart_ = 0;  // in place: first send element, relative to the receive region
  size_t sendCount_ = 0;
};

// One collective under test: the call, its buffer sizes, its bandwidth factors and its data.
class Collective {
 public:
  virtual ~Collective() = default;

  virtual bool reduces() const { return false; }  // takes -o
  virtual bool rooted() const { return false; }   // takes -r
  virtual CollCounts counts(size_t count, int nranks) const = 0;
  virtual ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, int root, ncclComm_t comm,
                           cudaStream_t stream) const = 0;
  // A collective made of dependent steps (hypercube's exchange rounds) runs them one group at a
  // time: the driver issues round 0 of every local rank and aggregated call in one group, then
  // round 1, ... (one group for all rounds would let a later round overtake an earlier one).
  virtual int rounds(int nranks) const { return 1; }
  virtual ncclResult_t runRound(int round, const void* send, void* recv, size_t count,
                                ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm,
                                cudaStream_t stream) const {
    return run(send, recv, count, type, op, root, comm, stream);
  }
  // Bytes per call that algbw counts (count is the call's count argument).
  virtual double algBytes(size_t count, size_t typeSize, int nranks) const = 0;
  // busbw = algbw * busFactor.
  virtual double busFactor(int nranks) const = 0;
  // Element i of this rank's send region.
  virtual double input(const DataView& v, size_t i) const = 0;
  // Element k of this rank's receive region after the call.
  virtual Expect expected(const DataView& v, size_t k) const = 0;
  // False where an in-place call has no defined result: its #wrong column prints N/A.
  virtual bool checksInPlace() const { return true; }
  // The data movement of the roofline columns on device memory (perf/roofline.h); kNone: none.
  virtual Pattern pattern() const { return Pattern::kNone; }
  // Empty when the collective can run on nranks ranks, else the line to print instead.
  virtual std::string unsupported(int nranks) const { return ""; }
};

}  // namespace weft::perf
