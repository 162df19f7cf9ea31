#include "src/exec/lower.h"

#include <algorithm>
#include <atomic>

#include "src/common/error.h"
#include "src/plan/traits.h"

namespace weft::exec {
namespace {

using plan::Op;
using plan::OutputUse;

// Largest call (count x ranks) whose ranks keep a shared core while they wait (wait.cc): past
// it a context switch no longer costs more than the call's work. See perf/README.md, "Holding
// a shared core".
constexpr uint64_t kHoldBytes = 256 * 1024;
constexpr uint32_t kMaxLaneBurst = 1024;

// Largest message a fast-path step moves (below any slot; a fast-path send always copies, and a
// fast-path receive takes what comes, in a slot or by reference, or leaves it to the
// interpreter): more for a rank that only sends or only receives than for an exchange, where
// both directions' copies sit on the call's critical path. See perf/README.md, "Straight calls".
constexpr uint64_t kStraightBytes = 8192;
constexpr uint64_t kStraightExchangeBytes = 2048;
// Most steps a fast-path program has (a 2-rank allreduce's send, copy, receive-reduce and copy),
// and the most one local copy or reduction among them touches.
constexpr size_t kStraightSteps = 6;
constexpr uint64_t kStraightLocalBytes = 64 * 1024;

// Whether [a, a + aBytes) and [b, b + bBytes) share no byte.
bool disjoint(const char* a, uint64_t aBytes, const char* b, uint64_t bBytes) {
  return a + aBytes <= b || b + bBytes <= a;
}

// Steps whose sends may store their data straight into the receiver's landing: forwards of
// what this rank also keeps (a partial sum, reduce-send, goes on to be reduced again, never
// into a plain receive the built-in plans offer).
bool landsForward(Op op) { return op == Op::kRecvReduceCopySend || op == Op::kRecvCopySend; }

bool localOp(Op op) { return op == Op::kNop || op == Op::kCopy || op == Op::kReduce; }

// A small call whose rank both sends and receives: a context switch costs more than its work.
// A rank that only receives (a broadcast's) or only sends gains nothing from holding a core:
// its FIFOs already let it run several calls a turn.
bool exchangesLittle(const Work& w) {
  const plan::Spec& spec = w.plan->spec;
  if (spec.count * static_cast<uint64_t>(spec.nranks) * dataTypeSize(w.type) > kHoldBytes)
    return false;
  bool sends = false, recvs = false;
  for (const auto& lane : w.program->lanes)
    for (const plan::Step& step : lane.steps) {
      sends = sends || plan::opSends(step.op);
      recvs = recvs || plan::opRecvs(step.op);
    }
  return sends && recvs;
}

// Whether the call never writes the input it sends from: the plan says so, or input and output
// lie apart.
bool inputApart(const Work& w, const plan::RankTraits& traits) {
  const plan::Spec& spec = w.plan->spec;
  if (traits.sentDataStaysPut) return true;
  const char* in = w.buffers[plan::kInput];
  const char* out = w.buffers[plan::kOutput];
  if (!in || !out) return true;
  const plan::BufferSizes sizes = plan::bufferSizes(spec, w.rank);
  const size_t es = dataTypeSize(w.type);
  return disjoint(out, sizes.output * es, in, sizes.input * es);
}

// Which outputs are written with streaming stores. Final results in a large output are
// streamed: such an output has left the cache before anyone rereads it, so skipping the
// read-for-ownership of each line saves a third of a copy's memory traffic. Input and output
// together decide, with a threshold per kind of collective (copies, reductions, allreduce, and
// results that also land in a peer's memory, which nobody rereads). See perf/README.md,
// "Streaming stores".
struct StorePolicy {
  bool output = false;  // results in the output stream
  bool landed = false;  // results also stored into a landing stream
  const char* inputBegin = nullptr;
  const char* inputEnd = nullptr;
};

StorePolicy storePolicy(const Work& w, const plan::RankTraits& traits, const Tuning& t, size_t es) {
  StorePolicy p;
  const plan::Spec& spec = w.plan->spec;
  const bool allReduce = traits.output == OutputUse::kReducedAndReread;
  const bool reduces = traits.output == OutputUse::kReduced;
  // No rank's input or output exceeds count x nranks elements: small calls skip the sizes.
  const uint64_t most = 2 * spec.count * static_cast<uint64_t>(spec.nranks) * es;
  const uint64_t least = allReduce ? t.streamAllReduceBytes
                         : reduces ? t.streamReduceBytes
                                   : t.streamBytes;
  const uint64_t leastLanded = t.streamLandedBytes;
  if ((least == 0 || t.copyFootprint(most) < least) && (leastLanded == 0 || most < leastLanded))
    return p;
  const plan::BufferSizes sizes = plan::bufferSizes(spec, w.rank);
  const uint64_t outBytes = sizes.output * es;
  // Only input this rank reads counts.
  if (traits.readsOwnInput && w.buffers[plan::kInput]) {
    p.inputBegin = w.buffers[plan::kInput];
    p.inputEnd = p.inputBegin + sizes.input * es;
  }
  // What the call makes this rank touch: its output, and an input of its own beside it.
  const char* out = w.buffers[plan::kOutput];
  const bool apart =
      p.inputBegin && (!out || disjoint(out, outBytes, p.inputBegin, p.inputEnd - p.inputBegin));
  const uint64_t touched = outBytes + (apart ? sizes.input * es : 0);
  const uint64_t weighed = allReduce ? outBytes : reduces ? touched : t.copyFootprint(touched);
  p.output = least != 0 && weighed >= least;
  p.landed = leastLanded != 0 && outBytes >= leastLanded;
  return p;
}

// Slots, scratch and the input stay cached, and so does output over the input (in place),
// whose lines this rank has just read or sent.
Store storeOf(const StorePolicy& p, bool streams, const plan::Ref& dst, const char* at,
              uint64_t bytes) {
  const bool overInput = at < p.inputEnd && p.inputBegin < at + bytes;
  return streams && dst.buffer == plan::kOutput && !overInput ? Store::kStreaming : Store::kCached;
}

}  // namespace

uint64_t nextWorkStamp() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

void lower(const Work& w, Lowered* out) {
  const Tuning& t = tuningOr(w.tuning);
  Lowered& L = *out;
  L.stamp = w.stamp;
  L.elemSize = dataTypeSize(w.type);
  const plan::Spec& spec = w.plan->spec;
  const plan::RankTraits traits = plan::rankTraits(spec, w.rank);
  L.rdvBytes = t.rendezvousBytes(traits.reducesIntoWhatItSendsInPlace &&
                                 w.buffers[plan::kInput] == w.buffers[plan::kOutput]);
  L.landingBytes = t.landingBytes;
  const bool bigRefs = t.sharedCores && t.sharedRefBytes > 0 && inputApart(w, traits);
  L.bigRefBytes = bigRefs ? t.sharedRefBytes : 0;
  L.holdsCore = exchangesLittle(w);
  L.readsOwnInput = traits.readsOwnInput;
  L.inputBytes = plan::bufferSizes(spec, w.rank).input * L.elemSize;
  L.bursts.clear();
  for (const auto& lane : w.program->lanes)
    if (lane.share != 1) {
      L.bursts = laneBursts(*w.program);
      break;
    }
  const StorePolicy policy = storePolicy(w, traits, t, L.elemSize);
  const bool premul = w.op == RedOp::kPreMulSum;

  const auto& lanes = w.program->lanes;
  L.laneFirst.assign(lanes.size(), 0);
  size_t total = 0;
  for (size_t l = 0; l < lanes.size(); ++l) {
    L.laneFirst[l] = total;
    total += lanes[l].steps.size();
  }
  L.steps.assign(total, LoweredStep{});
  for (size_t l = 0; l < lanes.size(); ++l)
    for (size_t i = 0; i < lanes[l].steps.size(); ++i) {
      const plan::Step& s = lanes[l].steps[i];
      LoweredStep& ls = L.at(l, i);
      ls.scaled = premul && s.src.buffer == plan::kInput && plan::opReadsSrc(s.op);
      const bool sends = plan::opSends(s.op);
      const bool plainScaled = s.op == Op::kSend && ls.scaled;
      ls.mayLand = sends && L.landingBytes > 0 &&
                   (landsForward(s.op) || (s.op == Op::kSend && lanes[l].push));
      ls.mayRef = sends && w.byReference && s.op != Op::kRecvReduceSend && !plainScaled;
      ls.bigRefs = bigRefs && s.op == Op::kSend && w.byReference && !plainScaled;
      ls.offers = s.op == Op::kRecv && L.landingBytes > 0;
      // A buffer the caller has not placed yet (a device encoding's scratch) stays cached.
      if (plan::opWritesDst(s.op) && (policy.output || policy.landed) && w.buffers[s.dst.buffer]) {
        const char* at = w.buffers[s.dst.buffer] + s.dst.offset * L.elemSize;
        const uint64_t bytes = s.count * L.elemSize;
        ls.store = storeOf(policy, policy.output, s.dst, at, bytes);
        ls.landedStore = storeOf(policy, policy.landed, s.dst, at, bytes);
      } else if (s.op == Op::kSend && policy.landed) {
        ls.landedStore = Store::kStreaming;  // a plain send's landing is nobody's input
      }
    }
}

bool lowersToPreMulSum(RedOp op, DataType type) {
  return op == RedOp::kPreMulSum || (op == RedOp::kAvg && isFloating(type));
}

void lowerOperator(Work* w, RedOp op, const Scalar& scalar) {
  if (static_cast<int>(op) < 0 || static_cast<int>(op) > static_cast<int>(RedOp::kPreMulSum))
    throw Error(Status::kInvalidArgument,
                "invalid reduction operator " + std::to_string(static_cast<int>(op)));
  w->op = op;
  w->scalar = op == RedOp::kPreMulSum ? scalar : Scalar{};
  w->divisor = 0;
  w->divideCount = 0;
  if (op != RedOp::kAvg) return;
  const plan::Spec& spec = w->plan->spec;
  if (lowersToPreMulSum(op, w->type)) {
    w->op = RedOp::kPreMulSum;
    w->scalar = reciprocalScalar(w->type, spec.nranks);
    return;
  }
  w->op = RedOp::kSum;
  const bool hasResult = spec.coll != plan::Collective::kReduce || spec.root == w->rank;
  if (spec.nranks > 1 && hasResult && spec.count > 0) {
    w->divisor = static_cast<uint64_t>(spec.nranks);
    w->divideCount = spec.count;
  }
}

void finishWork(Work& w) {
  if (w.divisor > 1) divideElements(w.type, w.buffers[plan::kOutput], w.divideCount, w.divisor);
  if (w.finish) w.finish();
}

StraightShape lowerStraight(const Work& w) {
  StraightShape shape;
  shape.stamp = w.stamp;
  shape.sharedCores = tuningOr(w.tuning).sharedCores;
  if (!w.program || w.op == RedOp::kPreMulSum || w.divisor > 1 || w.finish) return shape;
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
  if (!shape.sends && !shape.recv) return shape;  // all local: the interpreter is quick enough
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

std::vector<uint32_t> laneBursts(const plan::Program& program) {
  uint32_t least = 0;
  for (const auto& lane : program.lanes)
    if (lane.share > 0 && (least == 0 || lane.share < least)) least = lane.share;
  std::vector<uint32_t> bursts(program.lanes.size(), kLaneBurst);
  if (least == 0) return bursts;
  for (size_t l = 0; l < bursts.size(); ++l) {
    const double b = static_cast<double>(kLaneBurst) * program.lanes[l].share / least;
    bursts[l] = static_cast<uint32_t>(std::clamp(b + 0.5, 1.0, double{kMaxLaneBurst}));
  }
  return bursts;
}

}  // namespace weft::exec
