#include "transports/shm/pair_fifo.h"

#include <algorithm>

#include "src/common/error.h"
#include "transports/shm/descriptor.h"
#include "transports/shm/segment_names.h"

namespace weft::transport {

size_t pairBytes(const ConnectContext& ctx) {
  // The geometry is rank 0's, from the init allgather: checked before it sizes anything.
  std::string why;
  if (!fifoGeometryValid(ctx.slots, ctx.slotBytes, &why))
    fail(Status::kInvalidArgument, "cannot lay out a pair block: " + why);
  return 2 * fifoBytes(ctx.slots, ctx.slotBytes);
}

void pairInit(void* mem, const ConnectContext& ctx) {
  fifoInit(mem);
  fifoInit(static_cast<char*>(mem) + fifoBytes(ctx.slots, ctx.slotBytes));
}

std::string pairName(const ConnectContext& ctx, int peer, int channel) {
  int lo = std::min(ctx.rank, peer), hi = std::max(ctx.rank, peer);
  // Both ranks' processes are in the name: once either is gone the block serves nobody.
  return segmentName(
      ctx.commHash,
      "pair." + std::to_string(lo) + "." + std::to_string(hi) + "." + std::to_string(channel),
      {(*ctx.peers)[lo].pid, (*ctx.peers)[hi].pid});
}

std::unique_ptr<Connection> pairConnection(const ConnectContext& ctx, int peer, void* mem,
                                           const char* name, std::shared_ptr<void> keepAlive,
                                           std::function<Status(std::string*)> health,
                                           RemoteMode remote) {
  char* lowToHigh = static_cast<char*>(mem);
  char* highToLow = lowToHigh + fifoBytes(ctx.slots, ctx.slotBytes);
  bool low = ctx.rank < peer;
  std::shared_ptr<Doorbell> bell = (*ctx.bells)[peer];
  FifoConnection::Params p;
  p.outMem = low ? lowToHigh : highToLow;
  p.inMem = low ? highToLow : lowToHigh;
  p.slots = ctx.slots;
  p.slotBytes = ctx.slotBytes;
  p.peerBell = bell.get();
  if (ctx.failures && static_cast<size_t>(peer) < ctx.failures->size())
    p.peerFailure = (*ctx.failures)[peer];
  p.name = name;
  p.health = std::move(health);
  p.remote = remote;
  p.peerPid = (*ctx.peers)[peer].pid;
  if (ctx.tuning) {
    p.shareCopy = ctx.tuning->shareCopy;
    p.sharedCores = ctx.tuning->sharedCores;
  }
  p.keepAlive = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<Doorbell>>>(
      std::move(keepAlive), std::move(bell));
  return std::make_unique<FifoConnection>(std::move(p));
}

}  // namespace weft::transport
