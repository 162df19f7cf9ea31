// The soak's random collective calls: every rank of a job draws the same sequence from the job's
// seed, fills its inputs from the call's value tables and checks its outputs against them.
// Reductions use small integers chosen so that every sum, product, min and max is exact in every
// type (any order of evaluation gives the same bits); only a floating-point Avg, which Weft
// computes as a sum of inputs scaled by 1/n, is compared with a tolerance. Data-movement
// collectives move random bit patterns and are compared bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace soak {

inline constexpr int kMaxRanks = 8;

enum class Kind : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv,  // a group of one send and one receive per rank, peers a random permutation
  kNumKinds
};
const char* kindName(Kind k);

// The limits calls are drawn within.
struct CallLimits {
  size_t maxCount = 16u << 20;    // elements, NCCL's count argument
  size_t maxJobBytes = 1u << 30;  // send + receive buffers of all ranks of one call together
};

struct Call {
  Kind kind = Kind::kAllReduce;
  ncclDataType_t type = ncclInt32;
  ncclRedOp_t op = ncclSum;
  size_t count = 0;  // NCCL's count: per rank block for gathers, scatters and alltoall
  bool inPlace = false;
  int root = 0;
  uint64_t salt = 0;
  int sendAlign = 0, recvAlign = 0;  // elements by which the buffers start past an aligned address
  int8_t peerOf[kMaxRanks] = {};     // kSendRecv: rank r sends to peerOf[r]

  bool reduces() const;
  std::string describe() const;
};

// Call `index` of a job of `nranks` ranks. The last call of every job is an allreduce, which needs
// every rank's data, so that no rank can finish a job whose peer died.
Call drawCall(uint64_t jobSeed, int index, int calls, int nranks, const CallLimits& limits);

size_t typeSize(ncclDataType_t t);

// Everything one rank needs to run and check one call: value tables, buffers, expectations.
class CallRun {
 public:
  CallRun(const Call& call, int rank, int nranks);
  ~CallRun();
  CallRun(const CallRun&) = delete;
  CallRun& operator=(const CallRun&) = delete;

  // Issues the call on `comm` (blocking, stream NULL).
  ncclResult_t issue(ncclComm_t comm);
  // Empty when the outputs, the untouched inputs and the guard bytes are all as they must be.
  std::string check() const;

 private:
  static constexpr uint8_t kGuard = 0x5A;      // bytes around every buffer
  static constexpr uint8_t kUnwritten = 0xA5;  // output bytes before the call
  static constexpr size_t kGuardBytes = 64;    // after the data; before it: 64 + the alignment
  // Prod: ranks from this one on draw no factor 2, so a product is at most 2^6 = 64, exact in
  // every type (int8 and fp8 too).
  static constexpr int kProdCappedFromRank = 6;
  struct Buffer {
    uint8_t* base = nullptr;  // allocation: guard, data, guard
    size_t bytes = 0;         // data bytes
    size_t lead = 0;          // guard bytes before the data
    size_t mapped = 0;        // the whole allocation
    uint8_t* data() const { return base + lead; }
  };
  Buffer allocate(size_t elems, int alignElems);
  void release(Buffer& b);
  // Rank `r`'s input element i.
  const uint8_t* value(int r, size_t i) const;
  void fillInput(uint8_t* dst, int r, size_t first, size_t n) const;
  // First element in [0, n) of `got` that differs from rank r's inputs first.. (or -1).
  long long firstInputMismatch(const uint8_t* got, int r, size_t first, size_t n) const;
  long long firstReducedMismatch(const uint8_t* got, size_t first, size_t n) const;
  std::string mismatch(const char* what, long long at, const uint8_t* got, size_t first) const;
  void buildTables();
  std::string checkGuards(const Buffer& b, const char* name) const;
  std::string checkOutput() const;
  std::string checkUntouched(const uint8_t* p, size_t n, const char* what) const;
  size_t sendElems() const;
  size_t recvElems() const;

  Call c_;
  int rank_, n_;
  size_t elem_;
  size_t period_ = 1;           // value tables repeat with this period
  std::vector<size_t> offset_;  // rank r's input i is its table's entry (i + offset_[r]) % period
  std::vector<uint8_t> table_;  // encoded values
  std::vector<uint8_t> cappedTable_;     // Prod on ranks 6 and 7: no factor 2 (see .cc)
  std::vector<uint8_t> reduced_;         // encoded exact reduction, by (i + 0) % period
  std::vector<double> avgSum_, avgAbs_;  // floating Avg: exact sum and sum of magnitudes
  Buffer sendBuf_, recvBuf_;             // in place: only the larger side is allocated
  uint8_t* send_ = nullptr;              // what the call gets
  uint8_t* recv_ = nullptr;
  bool inPlace_ = false;  // the call's in-place form applies to this rank
};

}  // namespace soak
