// One user call (collective or point-to-point) as the core sees it.
#pragma once
#include <cstdint>

#include "src/common/datatype.h"
#include "src/plan/plan.h"

namespace weft::core {

class Communicator;

struct Call {
  Communicator* comm = nullptr;
  plan::Collective coll = plan::Collective::kAllReduce;  // kSendRecv for Send / Recv
  const void* send = nullptr;
  void* recv = nullptr;
  uint64_t count = 0;
  DataType type = DataType::kFloat32;
  int op = 0;    // ncclRedOp_t value (built-in or PreMulSum handle)
  int root = 0;  // root, or peer for Send / Recv
  bool isSend = false;
  void* stream = nullptr;
};

}  // namespace weft::core
