#include "src/core/call.h"

namespace weft::core {

BufferUse bufferUse(const Call& call, int rank, int nranks) {
  BufferUse use;
  if (call.count == 0) return use;
  use.readsSend = use.writesRecv = true;
  switch (call.coll) {
    case plan::Collective::kBroadcast:
    case plan::Collective::kScatter:
      use.readsSend = rank == call.root;
      break;
    case plan::Collective::kReduce:
    case plan::Collective::kGather:
      use.writesRecv = rank == call.root;
      break;
    case plan::Collective::kSendRecv:
      use.readsSend = call.isSend;
      use.writesRecv = !call.isSend;
      break;
    default:
      break;
  }
  const uint64_t es = dataTypeSize(call.type);
  if (call.coll == plan::Collective::kSendRecv) {
    use.sendBytes = use.readsSend ? call.count * es : 0;
    use.recvBytes = use.writesRecv ? call.count * es : 0;
    return use;
  }
  plan::Spec spec;
  spec.coll = call.coll;
  spec.nranks = nranks;
  spec.root = call.root;
  spec.count = call.count;
  const plan::BufferSizes sizes = plan::bufferSizes(spec, rank);
  use.sendBytes = use.readsSend ? sizes.input * es : 0;
  use.recvBytes = use.writesRecv ? sizes.output * es : 0;
  return use;
}

}  // namespace weft::core
