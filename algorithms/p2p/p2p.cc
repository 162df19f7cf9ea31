#include "algorithms/p2p/p2p.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "algorithms/common/builder.h"
#include "src/common/error.h"

namespace weft::algo {

plan::Program p2pProgram(int rank, int nranks, const std::vector<P2pOp>& ops) {
  auto bad = [](const std::string& m) { throw Error(Status::kInvalidArgument, m); };
  if (nranks < 1 || rank < 0 || rank >= nranks)
    bad("p2p group: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  Program p;
  std::map<std::pair<int, bool>, int> lanes;  // (peer, send) -> lane; each keeps its ops' order
  std::vector<const P2pOp*> selfSends, selfRecvs;
  for (const P2pOp& op : ops) {
    if (op.peer < 0 || op.peer >= nranks)
      bad("p2p group on rank " + std::to_string(rank) + ": peer " + std::to_string(op.peer) +
          " is not a rank of " + std::to_string(nranks));
    const uint16_t buffer = plan::kExtra + op.bufferIndex;
    if (buffer < op.bufferIndex) bad("p2p group: buffer index out of range");
    if (p.extraElems.size() <= op.bufferIndex) p.extraElems.resize(op.bufferIndex + 1, 0);
    p.extraElems[op.bufferIndex] = std::max(p.extraElems[op.bufferIndex], op.count);
    if (op.peer == rank) {
      (op.send ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    auto [it, fresh] = lanes.emplace(std::make_pair(op.peer, op.send), 0);
    if (fresh) it->second = addLane(p, 0);
    addStep(p, it->second,
            op.send ? sendStep(op.peer, {buffer, 0}, op.count)
                    : recvStep(op.peer, {buffer, 0}, op.count));
  }
  if (selfSends.size() != selfRecvs.size())
    bad("p2p group on rank " + std::to_string(rank) + " has " + std::to_string(selfSends.size()) +
        " sends to itself but " + std::to_string(selfRecvs.size()) + " receives from itself");
  if (!selfSends.empty()) {
    const int lane = addLane(p, 0);
    for (size_t i = 0; i < selfSends.size(); ++i) {
      if (selfSends[i]->count != selfRecvs[i]->count)
        bad("p2p group on rank " + std::to_string(rank) + ": send to itself of " +
            std::to_string(selfSends[i]->count) + " elements meets a receive of " +
            std::to_string(selfRecvs[i]->count));
      addStep(p, lane,
              copyStep({static_cast<uint16_t>(plan::kExtra + selfSends[i]->bufferIndex), 0},
                       {static_cast<uint16_t>(plan::kExtra + selfRecvs[i]->bufferIndex), 0},
                       selfSends[i]->count));
    }
  }
  return p;
}

}  // namespace weft::algo
