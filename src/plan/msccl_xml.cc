// MSCCL's names for collectives, step types and buffers (see msccl_xml_internal.h).
#include "src/plan/msccl_xml.h"

#include <string_view>

#include "src/plan/msccl_xml_internal.h"

namespace weft::plan {
namespace detail {

const char* mscclType(Op op) {
  if (op == Op::kRecvReduce) return "rrc";
  for (const OpType& t : kOpTypes)
    if (t.op == op) return t.name;
  return nullptr;
}

const char* bufferLetter(uint16_t b) {
  switch (b) {
    case kInput:
      return "i";
    case kOutput:
      return "o";
    case kScratch:
      return "s";
    default:
      return nullptr;
  }
}

}  // namespace detail

bool mscclCollective(std::string_view name, Collective* coll) {
  for (const auto& [n, c] : detail::kCollectives)
    if (name == n) {
      *coll = c;
      return true;
    }
  return false;
}

}  // namespace weft::plan
