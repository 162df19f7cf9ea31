// Internals of the MSCCL XML reader and writer (src/plan/msccl_xml.h): the names both use.
//   msccl_xml.cc             lookups in these names
//   msccl_xml_import.cc      importMsccl: the XML into a ChunkPlan in normal form
//   msccl_xml_export.cc      exportMsccl: a ChunkPlan into MSCCL's old format
//   chunk_plan_difference.cc the first difference between two ChunkPlans
#pragma once
#include <cstdint>
#include <utility>

#include "src/plan/chunk_plan.h"
#include "src/plan/plan.h"

namespace weft::plan::detail {

struct OpType {
  const char* name;
  Op op;
};
// MSCCL's step types. `rrc` with src == dst reads back as kRecvReduce (see msccl_xml.h).
inline constexpr OpType kOpTypes[] = {
    {"s", Op::kSend},
    {"r", Op::kRecv},
    {"rcs", Op::kRecvCopySend},
    {"rrs", Op::kRecvReduceSend},
    {"rrc", Op::kRecvReduceCopy},
    {"rrcs", Op::kRecvReduceCopySend},
    {"cpy", Op::kCopy},
    {"re", Op::kReduce},
    {"nop", Op::kNop},
};

// The step type of an op (nullptr for an op MSCCL has no type for).
const char* mscclType(Op op);

// "i", "o" or "s" for the input, output and scratch buffers; nullptr for any other buffer.
const char* bufferLetter(uint16_t b);

// MSCCL's collective names (the coll attribute of <algo>).
inline constexpr std::pair<const char*, Collective> kCollectives[] = {
    {"allreduce", Collective::kAllReduce},
    {"allgather", Collective::kAllGather},
    {"reducescatter", Collective::kReduceScatter},
    {"broadcast", Collective::kBroadcast},
    {"reduce", Collective::kReduce},
    {"alltoall", Collective::kAlltoAll},
    {"gather", Collective::kGather},
    {"scatter", Collective::kScatter},
};

// Collectives with a root rank (written as a root attribute on <algo>).
inline bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

}  // namespace weft::plan::detail
