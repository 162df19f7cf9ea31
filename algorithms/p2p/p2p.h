// The programs of point-to-point groups (ncclSend / ncclRecv between ncclGroupStart and
// ncclGroupEnd). Not a registered algorithm: a group is a list of operations per rank, not a
// Spec, and each rank builds only its own Program.
#pragma once
#include <cstdint>
#include <vector>

#include "src/plan/plan.h"

namespace weft::algo {

// One point-to-point operation of a group, on buffer plan::kExtra + bufferIndex.
struct P2pOp {
  bool send = true;
  int peer = 0;
  uint64_t count = 0;  // elements
  uint16_t bufferIndex = 0;
};

// The Program of `rank` for a group of sends and receives: operations with one peer and one
// direction keep their order (NCCL semantics); self send/recv pairs become copies.
plan::Program p2pProgram(int rank, int nranks, const std::vector<P2pOp>& ops);

}  // namespace weft::algo
