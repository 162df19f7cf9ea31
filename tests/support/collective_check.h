// Runs one collective on every rank of a set of communicators and checks the results against
// closed-form expectations. Ranks are driven from one thread (a group) or one thread per rank.
#pragma once
#include <string>
#include <vector>

#include "nccl.h"

namespace weft::test {

enum class Coll {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv
};
const char* collName(Coll c);
bool isReduction(Coll c);
bool supportsInPlace(Coll c);

struct CheckCase {
  Coll coll = Coll::kAllReduce;
  ncclDataType_t type = ncclFloat32;
  int op = ncclSum;  // ncclRedOp_t; -1 asks for a PreMulSum op with scalar 2
  size_t count = 0;
  int root = 0;
  bool inPlace = false;
  bool threads = false;  // one thread per rank instead of a group from this thread
};

struct CheckResult {
  ncclResult_t status = ncclSuccess;
  uint64_t wrong = 0;
  std::string message;  // first failure, for assertions
};

// ncclCommInitAll of comms.size() ranks in this process with NCCL_ALGO=algo for their plans
// (the environment is left as it was found).
ncclResult_t initAllWithAlgo(std::vector<ncclComm_t>& comms, const char* algo);

CheckResult runCheck(const std::vector<ncclComm_t>& comms, const CheckCase& c);
std::string describe(const CheckCase& c, int nranks);

// This process's ranks of one communicator, when several processes share it: checks only
// `myRanks` (global rank numbers), each driven by its own comm in `comms`.
CheckResult runCheckRanks(const std::vector<ncclComm_t>& comms, const std::vector<int>& myRanks,
                          int nranks, const CheckCase& c);

}  // namespace weft::test
