// The interpreter's fast path: a small repeated call's Work moved straight through its links,
// without the lane machinery (lowerStraight() in lower.cc decides which Works qualify).
//
// Why: on a VM whose cores hand a cache line over slowly, the store that publishes a message
// waits for its line to come back from the peer polling it, and a core whose store buffer fills
// meanwhile stalls. A call that stores little after its post keeps going, and a pass through the
// group layer and the full interpreter stores a few hundred lines. See perf/README.md,
// "Straight calls".
#include <array>
#include <cstring>

#include "src/common/doorbell.h"
#include "src/common/reduce.h"
#include "src/exec/executor.h"
#include "src/exec/lower.h"

namespace weft::exec {

namespace {
using plan::Op;
// Polls for a message or a free slot before the call is left to the interpreter (a few us).
constexpr uint32_t kStraightPolls = 512;
}  // namespace

Straight runStraight(Work& w, uint32_t tag) {
  if (w.stamp == 0 || w.straight.stamp != w.stamp) w.straight = lowerStraight(w);
  const StraightShape& shape = w.straight;
  if (!shape.straight) return Straight::kNotRun;
  const uint64_t es = dataTypeSize(w.type);
  auto at = [&](const plan::Ref& r) { return w.buffers[r.buffer] + r.offset * es; };

  // Until a message goes out nothing is done unless everything can be. A peer a moment behind
  // is waited for here, briefly, while each rank has a core.
  const uint32_t polls = shape.sharedCores ? 1 : kStraightPolls;
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
    if (inData && !remote && gotTag == tag && got == shape.recv->count * es) return true;
    shape.in->doneReading();  // left for the executor, which receives it again
    return false;
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
        case Op::kSend:
          send();
          break;
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
        default:
          break;
      }
    }
  }
  return Straight::kDone;
}

}  // namespace weft::exec
