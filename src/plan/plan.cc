#include "src/plan/plan.h"

#include <sstream>

namespace weft::plan {

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "allreduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAllGather:
      return "allgather";
    case Collective::kReduceScatter:
      return "reducescatter";
    case Collective::kAlltoAll:
      return "alltoall";
    case Collective::kGather:
      return "gather";
    case Collective::kScatter:
      return "scatter";
    case Collective::kSendRecv:
      return "sendrecv";
  }
  return "?";
}

const char* opName(Op op) {
  switch (op) {
    case Op::kNop:
      return "nop";
    case Op::kSend:
      return "s";
    case Op::kRecv:
      return "r";
    case Op::kRecvReduce:
      return "rr";
    case Op::kRecvCopySend:
      return "rcs";
    case Op::kRecvReduceSend:
      return "rrs";
    case Op::kRecvReduceCopy:
      return "rrc";
    case Op::kRecvReduceCopySend:
      return "rrcs";
    case Op::kCopy:
      return "cpy";
    case Op::kReduce:
      return "re";
  }
  return "?";
}

BufferSizes bufferSizes(const Spec& s, int rank) {
  const uint64_t n = s.nranks, c = s.count;
  switch (s.coll) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kReduce:
      return {c, c};
    case Collective::kAllGather:
      return {c, c * n};
    case Collective::kReduceScatter:
      return {c * n, c};
    case Collective::kAlltoAll:
      return {c * n, c * n};
    case Collective::kGather:
      return {c, rank == s.root ? c * n : 0};
    case Collective::kScatter:
      return {rank == s.root ? c * n : 0, c};
    case Collective::kSendRecv:
      return {0, 0};
  }
  return {};
}

static const char* bufferName(uint16_t b) {
  switch (b) {
    case kInput:
      return "i";
    case kOutput:
      return "o";
    case kScratch:
      return "s";
    default:
      return "x";
  }
}

std::string toText(const Plan& plan) {
  std::ostringstream out;
  out << "plan " << plan.algorithm << " " << collectiveName(plan.spec.coll)
      << " nranks=" << plan.spec.nranks << " root=" << plan.spec.root
      << " count=" << plan.spec.count << "\n";
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const Program& p = plan.programs[r];
    out << "rank " << r << " scratch=" << p.scratchElems << "\n";
    for (size_t l = 0; l < p.lanes.size(); ++l) {
      out << "  lane " << l << " channel=" << p.lanes[l].channel;
      if (p.lanes[l].sendChannel >= 0) out << " sendChannel=" << p.lanes[l].sendChannel;
      if (p.lanes[l].push) out << " push";
      out << "\n";
      for (size_t s = 0; s < p.lanes[l].steps.size(); ++s) {
        const Step& st = p.lanes[l].steps[s];
        out << "    " << s << ": " << opName(st.op);
        if (st.recvPeer >= 0) out << " from=" << st.recvPeer;
        if (st.sendPeer >= 0) out << " to=" << st.sendPeer;
        if (opReadsSrc(st.op)) {
          out << " src=" << bufferName(st.src.buffer);
          if (st.src.buffer >= kExtra) out << (st.src.buffer - kExtra);
          out << "[" << st.src.offset << "]";
        }
        if (opWritesDst(st.op)) {
          out << " dst=" << bufferName(st.dst.buffer);
          if (st.dst.buffer >= kExtra) out << (st.dst.buffer - kExtra);
          out << "[" << st.dst.offset << "]";
        }
        out << " n=" << st.count;
        for (const auto& d : st.deps) out << " dep=" << d.lane << "." << d.step;
        out << "\n";
      }
    }
  }
  return out.str();
}

}  // namespace weft::plan
