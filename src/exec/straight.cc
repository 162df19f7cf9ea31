// runStraight: a small repeated call's Work run through without the lane machinery.
//
// Why: on a VM whose cores hand a cache line over slowly, the store that publishes a message
// waits for its line to come back from the peer polling it, and a core whose store buffer fills
// meanwhile stalls. A call that stores little after its post keeps going. Two processes passing
// 8 B messages through a slot FIFO, with a number of stores to distinct lines behind each post:
// about 70 ns a message with 16, 100-127 with 64, 150-220 with 128, 270-300 with 256 (a pass
// through the API, the group layer and the executor makes a few hundred).
#include <array>
#include <cstring>

#include "src/common/futex.h"
#include "src/common/reduce.h"
#include "src/exec/executor.h"

namespace weft::exec {

namespace {

using plan::Op;

// Largest message a straight step moves (below any slot; a straight send always copies, and a
// straight receive takes what comes, in a slot or by reference, or leaves it to the executor):
// 8 KiB for a rank that only sends or only receives (2 ranks, broadcast, us a call: 4 KiB 0.54
// through the executor against 0.29 straight, 8 KiB 0.60 against 0.35; 16 KiB between threads
// no better), 2 KiB for an exchange (a 2-rank allreduce of 4 KiB: 1.12-1.18 out of place
// through the executor against 1.29-1.38 straight; of 2 KiB 0.53-0.55 against 0.37-0.49).
constexpr uint64_t kStraightBytes = 8192;
constexpr uint64_t kStraightExchangeBytes = 2048;
// Most steps a straight program has (a 2-rank allreduce's send, copy, receive-reduce and copy),
// and the most one local copy or reduction among them touches.
constexpr size_t kStraightSteps = 6;
constexpr uint64_t kStraightLocalBytes = 64 * 1024;
// Polls for a message or a free slot before the call is left to the executor (a few us).
constexpr uint32_t kStraightPolls = 512;

bool localOp(Op op) { return op == Op::kNop || op == Op::kCopy || op == Op::kReduce; }

// Whether `w` is run straight, and with which steps and links (may throw where connection()
// does, before anything is done).
StraightShape deriveShape(const Work& w) {
  StraightShape shape;
  shape.stamp = w.stamp;
  if (!w.program || w.op == RedOp::kPreMulSum || w.finish) return shape;
  const auto& lanes = w.program->lanes;
  const uint64_t es = dataTypeSize(w.type);
  auto has = [&](const plan::Ref& r) { return r.buffer < w.buffers.size() && w.buffers[r.buffer]; };
  // Lanes run one after the other, so a step may depend only on steps before it.
  size_t recvLane = 0, steps = 0;
  std::array<size_t, StraightShape::kMaxSends> sendLanes{};
  for (size_t l = 0; l < lanes.size(); ++l) {
    for (size_t i = 0; i < lanes[l].steps.size(); ++i) {
      const plan::Step& s = lanes[l].steps[i];
      if (++steps > kStraightSteps) return shape;
      for (const plan::StepRef& d : s.deps) {
        const auto dl = static_cast<size_t>(d.lane), ds = static_cast<size_t>(d.step);
        if (dl > l || (dl == l && ds >= i)) return shape;
      }
      const uint64_t bytes = s.count * es;
      if (localOp(s.op)) {
        if (s.op != Op::kNop && (!has(s.dst) || !has(s.src) || bytes > kStraightLocalBytes))
          return shape;
      } else if (s.op == Op::kSend && shape.sends < StraightShape::kMaxSends) {
        if (!has(s.src) || bytes == 0 || bytes > kStraightBytes) return shape;
        sendLanes[shape.sends] = l;
        shape.send[shape.sends++] = &s;
      } else if ((s.op == Op::kRecv || s.op == Op::kRecvReduce) && !shape.recv) {
        if (!has(s.dst) || bytes == 0 || bytes > kStraightBytes) return shape;
        shape.recv = &s;
        recvLane = l;
      } else {
        return shape;
      }
    }
  }
  if (!shape.sends && !shape.recv) return shape;  // all local: the executor is quick enough
  // An exchange sends first (its peer may be waiting for that before it sends what we wait
  // for), so its one send must be a lane of its own that run() can then skip. A rank that
  // receives sends at most once: it forwards what it got.
  shape.exchange = shape.sends && shape.recv;
  if (shape.recv && shape.sends > 1) return shape;
  shape.sendLane = static_cast<uint32_t>(sendLanes[0]);
  if (shape.exchange &&
      (shape.sendLane == recvLane || lanes[shape.sendLane].steps.size() != 1 ||
       shape.sendLane > 63 || shape.send[0]->count * es > kStraightExchangeBytes ||
       shape.recv->count * es > kStraightExchangeBytes))
    return shape;
  if (shape.recv) shape.in = w.conns->connection(shape.recv->recvPeer, lanes[recvLane].channel);
  for (uint32_t k = 0; k < shape.sends; ++k) {
    const plan::Step& s = *shape.send[k];
    shape.out[k] = w.conns->connection(s.sendPeer, plan::sendChannelOf(lanes[sendLanes[k]]));
    if (s.count * es > shape.out[k]->slotBytes()) return shape;
    // Every slot is taken before the first post: two sends on one connection would get one.
    for (uint32_t j = 0; j < k; ++j)
      if (shape.out[j] == shape.out[k]) return shape;
  }
  shape.straight = true;
  return shape;
}

}  // namespace

Straight runStraight(Work& w, uint32_t tag) {
  if (w.stamp == 0 || w.straight.stamp != w.stamp) w.straight = deriveShape(w);
  const StraightShape& shape = w.straight;
  if (!shape.straight) return Straight::kNotRun;
  const uint64_t es = dataTypeSize(w.type);
  auto at = [&](const plan::Ref& r) { return w.buffers[r.buffer] + r.offset * es; };

  // Until a message goes out nothing is done unless everything can be. A peer a moment behind
  // is waited for here, briefly, while each rank has a core.
  const uint32_t polls = oversubscribed() ? 1 : kStraightPolls;
  const void* inData = nullptr;
  auto received = [&] {
    uint32_t got = 0, gotTag = 0;
    uint64_t remote = 0;
    bool present = false;
    for (uint32_t p = 0;
         !(inData = shape.in->recvMessage(&got, &gotTag, &remote, &present)) && !present;
         cpuRelax())
      if (++p >= polls) return false;
    // Anything unusual (by reference, another operation's) is the executor's to handle.
    return inData && !remote && gotTag == tag && got == shape.recv->count * es;
  };
  if (shape.recv && !shape.exchange && !received()) return Straight::kNotRun;
  std::array<void*, StraightShape::kMaxSends> slots{};
  for (uint32_t k = 0; k < shape.sends; ++k)
    for (uint32_t p = 0; !(slots[k] = shape.out[k]->sendSlotFor(shape.send[k]->count * es));
         cpuRelax())
      if (++p >= polls) return Straight::kNotRun;
  uint32_t sent = 0;  // sends are met in program order
  auto send = [&] {
    const plan::Step& s = *shape.send[sent];
    std::memcpy(slots[sent], at(s.src), s.count * es);
    shape.out[sent]->post(static_cast<uint32_t>(s.count * es), tag);
    ++sent;
  };
  if (shape.exchange) {
    // The send's lane holds nothing else: send now, then wait for the peer's message.
    send();
    if (!received()) {
      std::fill(w.laneTags.begin(), w.laneTags.end(), tag);
      w.lanesDone = uint64_t(1) << shape.sendLane;
      return Straight::kSent;
    }
  }

  const auto& lanes = w.program->lanes;
  for (size_t l = 0; l < lanes.size(); ++l) {
    if (shape.exchange && l == shape.sendLane) continue;
    for (const plan::Step& s : lanes[l].steps) {
      switch (s.op) {
        case Op::kSend: send(); break;
        case Op::kRecv:
          std::memcpy(at(s.dst), inData, s.count * es);
          shape.in->release();
          break;
        case Op::kRecvReduce:
          reduce(w.type, w.op, at(s.dst), at(s.dst), false, inData, false, s.count, &w.scalar);
          shape.in->release();
          break;
        case Op::kCopy:
          if (at(s.dst) != at(s.src)) std::memmove(at(s.dst), at(s.src), s.count * es);
          break;
        case Op::kReduce:
          reduce(w.type, w.op, at(s.dst), at(s.dst), false, at(s.src), false, s.count, &w.scalar);
          break;
        default: break;
      }
    }
  }
  return Straight::kDone;
}

}  // namespace weft::exec
