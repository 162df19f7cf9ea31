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
  // The buffers are device memory and `stream` a CUDA stream (src/cuda/device_calls.h).
  bool device = false;
};

// Which of a call's buffers this rank reads and writes, and how many bytes of each: a rank
// writes its whole receive range where it writes it at all.
struct BufferUse {
  bool readsSend = false;
  bool writesRecv = false;
  uint64_t sendBytes = 0;
  uint64_t recvBytes = 0;
};
BufferUse bufferUse(const Call& call, int rank, int nranks);

}  // namespace weft::core
