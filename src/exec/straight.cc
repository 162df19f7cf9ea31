// runStraight: a small repeated call's Work run through without the lane machinery.
//
// Why: on a VM whose cores hand a cache line over slowly, the store that publishes a message
// waits for its line to come back from the peer polling it, and a core whose store buffer fills
// meanwhile stalls. A call that stores little after its post keeps going. Two processes passing
// 8 B messages through a slot FIFO, with a number of stores to distinct lines behind each post:
// about 70 ns a message with 16, 100-127 with 64, 150-220 with 128, 270-300 with 256 (a pass
// through the API, the group layer and the executor makes a few hundred).
#include <cstring>

#include "src/common/futex.h"
#include "src/common/reduce.h"
#include "src/exec/executor.h"

namespace weft::exec {

namespace {

using plan::Op;

// Largest message a straight step moves: below any slot and below the size a send passes by
// reference, so the receiving side sees the same kind of message whichever path sent it.
constexpr uint64_t kStraightBytes = 1024;
// Most steps a straight program has (a 2-rank allreduce's send, copy, receive-reduce and copy),
// and the most one local copy or reduction among them touches.
constexpr size_t kStraightSteps = 6;
constexpr uint64_t kStraightLocalBytes = 64 * 1024;
// Polls for a message or a free slot before the call is left to the executor (a few us).
constexpr uint32_t kStraightPolls = 512;

bool localOp(Op op) { return op == Op::kNop || op == Op::kCopy || op == Op::kReduce; }


}  // namespace

Straight runStraight(Work& w, uint32_t tag) {
  if (!w.program || w.op == RedOp::kPreMulSum || w.finish) return Straight::kNotRun;
  const auto& lanes = w.program->lanes;
  const uint64_t es = dataTypeSize(w.type);
  auto at = [&](const plan::Ref& r) -> char* {
    return r.buffer < w.buffers.size() && w.buffers[r.buffer]
               ? w.buffers[r.buffer] + r.offset * es
               : nullptr;
  };

  // The shape: lanes run one after the other, so a step may depend only on steps before it.
  const plan::Step* send = nullptr;
  const plan::Step* recv = nullptr;
  size_t sendLane = 0, recvLane = 0, steps = 0;
  for (size_t l = 0; l < lanes.size(); ++l) {
    for (size_t i = 0; i < lanes[l].steps.size(); ++i) {
      const plan::Step& s = lanes[l].steps[i];
      if (++steps > kStraightSteps) return Straight::kNotRun;
      for (const plan::StepRef& d : s.deps) {
        const auto dl = static_cast<size_t>(d.lane), ds = static_cast<size_t>(d.step);
        if (dl > l || (dl == l && ds >= i)) return Straight::kNotRun;
      }
      const uint64_t bytes = s.count * es;
      if (localOp(s.op)) {
        if (s.op != Op::kNop && (!at(s.dst) || !at(s.src) || bytes > kStraightLocalBytes))
          return Straight::kNotRun;
      } else if (s.op == Op::kSend && !send) {
        if (!at(s.src) || bytes == 0 || bytes > kStraightBytes) return Straight::kNotRun;
        send = &s;
        sendLane = l;
      } else if ((s.op == Op::kRecv || s.op == Op::kRecvReduce) && !recv) {
        if (!at(s.dst) || bytes == 0 || bytes > kStraightBytes) return Straight::kNotRun;
        recv = &s;
        recvLane = l;
      } else {
        return Straight::kNotRun;
      }
    }
  }
  if (!send && !recv) return Straight::kNotRun;  // all local: the executor is quick enough
  // An exchange sends first (its peer may be waiting for that before it sends what we wait
  // for), so the send must be a lane of its own, first, that run() can then skip.
  const bool exchange = send && recv;
  if (exchange && (sendLane == recvLane || lanes[sendLane].steps.size() != 1 || sendLane > 63))
    return Straight::kNotRun;

  // Until a message goes out nothing is done unless everything can be. A peer a moment behind
  // is waited for here, briefly, while each rank has a core.
  const uint32_t polls = oversubscribed() ? 1 : kStraightPolls;
  transport::Connection* in = nullptr;
  const void* inData = nullptr;
  auto received = [&](uint32_t most) {
    uint32_t got = 0, gotTag = 0;
    uint64_t remote = 0;
    bool present = false;
    for (uint32_t p = 0; !(inData = in->recvMessage(&got, &gotTag, &remote, &present)) && !present;
         cpuRelax())
      if (++p >= most) return false;
    // Anything unusual (by reference, another operation's) is the executor's to handle.
    return inData && !remote && gotTag == tag && got == recv->count * es;
  };
  if (recv) in = w.conns->connection(recv->recvPeer, lanes[recvLane].channel);
  if (recv && !exchange && !received(polls)) return Straight::kNotRun;
  transport::Connection* out = nullptr;
  void* slot = nullptr;
  if (send) {
    out = w.conns->connection(send->sendPeer, plan::sendChannelOf(lanes[sendLane]));
    const uint64_t bytes = send->count * es;
    if (bytes > out->slotBytes()) return Straight::kNotRun;
    for (uint32_t p = 0; !(slot = out->sendSlotFor(bytes)); cpuRelax())
      if (++p >= polls) return Straight::kNotRun;
  }
  if (exchange) {
    // The send's lane holds nothing else: send now, then wait for the peer's message.
    std::memcpy(slot, at(send->src), send->count * es);
    out->post(static_cast<uint32_t>(send->count * es), tag);
    if (!received(polls)) {
      std::fill(w.laneTags.begin(), w.laneTags.end(), tag);
      w.lanesDone = uint64_t(1) << sendLane;
      return Straight::kSent;
    }
  }

  for (size_t l = 0; l < lanes.size(); ++l) {
    if (exchange && l == sendLane) continue;
    for (const plan::Step& s : lanes[l].steps) {
      char* dst = at(s.dst);
      const char* src = at(s.src);
      switch (s.op) {
        case Op::kSend:
          std::memcpy(slot, src, s.count * es);
          out->post(static_cast<uint32_t>(s.count * es), tag);
          break;
        case Op::kRecv:
          std::memcpy(dst, inData, s.count * es);
          in->release();
          break;
        case Op::kRecvReduce:
          reduce(w.type, w.op, dst, dst, false, inData, false, s.count, &w.scalar);
          in->release();
          break;
        case Op::kCopy:
          if (dst != src) std::memmove(dst, src, s.count * es);
          break;
        case Op::kReduce:
          reduce(w.type, w.op, dst, dst, false, src, false, s.count, &w.scalar);
          break;
        default: break;
      }
    }
  }
  return Straight::kDone;
}

}  // namespace weft::exec
