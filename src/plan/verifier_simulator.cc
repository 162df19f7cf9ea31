// The plan verifier's run: every lane of every rank, event by event, over FIFOs of bounded
// slots. It matches sends with receives, orders the senders (and receivers) of a FIFO, keeps the
// vector clocks the race checks use, and reports a deadlock when no lane can move.
#include <map>
#include <tuple>

#include "src/plan/verifier_internal.h"

namespace weft::plan::detail {

Simulator::Simulator(const Plan& plan, const VerifyOptions& opt, bool inPlace)
    : plan_(plan),
      n_(plan.spec.nranks),
      inPlace_(inPlace),
      inPlaceOnly_(inPlace && !plan.outOfPlaceSafe) {
  words_ = (n_ + 63) / 64;
  uint64_t es = std::max<uint32_t>(1, plan.spec.elemSize);
  slice_ = opt.sliceElems ? opt.sliceElems : std::max<uint64_t>(1, kFifoSlotBytes / es);
  slots_ = std::max(1, opt.fifoSlots);
  reduction_ = plan.spec.coll == Collective::kAllReduce || plan.spec.coll == Collective::kReduce ||
               plan.spec.coll == Collective::kReduceScatter;
  setupSteps();
  setupArenas();
}

void Simulator::run() {
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t g = 0; g < lanes_.size(); ++g)
      while (advance(g)) progress = true;
  }
  reportDeadlock();
  for (const Fifo& f : fifos_) {
    if (f.q.empty()) continue;
    reject(mode() + describe(f.q.front().sender) + " sends " +
           std::to_string(f.q.front().msgCount) + " elements to rank " + std::to_string(f.to) +
           " on channel " + std::to_string(f.channel) + " that no step of rank " +
           std::to_string(f.to) + " receives");
  }
  checkPostcondition();
}

std::string Simulator::describe(int32_t gid) const {
  const LaneRun& L = lanes_[gLane_[gid]];
  return stepText(L.rank, L.lane, gIndex_[gid],
                  plan_.programs[L.rank].lanes[L.lane].steps[gIndex_[gid]]);
}

void Simulator::setupSteps() {
  std::map<std::tuple<int, int, int>, int> fifoIds;
  auto fifoId = [&](int from, int to, int channel) {
    auto [it, fresh] = fifoIds.emplace(std::make_tuple(from, to, channel), fifos_.size());
    if (fresh) fifos_.push_back(Fifo{from, to, channel, {}, -1, -1});
    return it->second;
  };
  for (int r = 0; r < n_; ++r) {
    laneBase_.push_back(lanes_.size());
    const Program& p = plan_.programs[r];
    for (size_t l = 0; l < p.lanes.size(); ++l) {
      LaneRun L;
      L.rank = r;
      L.lane = l;
      lanes_.push_back(L);
      gidBase_.push_back(gLane_.size());
      for (size_t s = 0; s < p.lanes[l].steps.size(); ++s) {
        const Step& st = p.lanes[l].steps[s];
        gLane_.push_back(lanes_.size() - 1);
        gIndex_.push_back(s);
        sendFifo_.push_back(opSends(st.op) ? fifoId(r, st.sendPeer, sendChannelOf(p.lanes[l]))
                                           : -1);
        recvFifo_.push_back(opRecvs(st.op) ? fifoId(st.recvPeer, r, p.lanes[l].channel) : -1);
      }
    }
  }
  laneBase_.push_back(lanes_.size());
  for (LaneRun& L : lanes_) L.vc.assign(lanes_.size(), 0);
  const size_t steps = gLane_.size();
  completed_.assign(steps, 0);
  vcEnd_.resize(steps);
  // End clocks are kept only where something joins them: dependencies and senders.
  needEnd_.assign(steps, 0);
  for (size_t g = 0; g < steps; ++g) {
    const LaneRun& L = lanes_[gLane_[g]];
    const Step& st = plan_.programs[L.rank].lanes[L.lane].steps[gIndex_[g]];
    if (opSends(st.op)) needEnd_[g] = 1;
    for (const StepRef& d : st.deps) needEnd_[gid(L.rank, d.lane, d.step)] = 1;
  }
}

void Simulator::join(std::vector<Clock>& into, const std::vector<Clock>& from) {
  for (size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], from[i]);
}

void Simulator::complete(size_t g, int32_t me) {
  LaneRun& L = lanes_[g];
  L.vc[g] = endStamp(L.step);
  if (needEnd_[me]) vcEnd_[me] = L.vc;
  completed_[me] = 1;
  ++L.step;
  L.started = false;
}

// Runs lane g one event further; false if it is done or blocked.
bool Simulator::advance(size_t g) {
  LaneRun& L = lanes_[g];
  const auto& steps = plan_.programs[L.rank].lanes[L.lane].steps;
  if (L.step >= steps.size()) return false;
  const Step& st = steps[L.step];
  const int32_t me = gidBase_[g] + L.step;
  const uint32_t k = L.step;
  if (!L.started) {
    for (const StepRef& d : st.deps)
      if (!completed_[gid(L.rank, d.lane, d.step)]) return false;
    for (const StepRef& d : st.deps) join(L.vc, vcEnd_[gid(L.rank, d.lane, d.step)]);
    L.vc[g] = startStamp(k);
    // A FIFO's senders (and its receivers) must be ordered, or messages could interleave.
    auto exclusive = [&](int32_t& last, const std::string& what) {
      if (!ordered(g, last))
        reject(mode() + describe(me) + " and " + describe(last) + " may both " + what +
               " at once: lanes sharing a peer and direction need different channels or a "
               "dependency");
      last = me;
    };
    if (sendFifo_[me] >= 0) {
      Fifo& f = fifos_[sendFifo_[me]];
      exclusive(f.lastSender, "send to rank " + std::to_string(f.to) + " on channel " +
                                  std::to_string(f.channel));
    }
    if (recvFifo_[me] >= 0) {
      Fifo& f = fifos_[recvFifo_[me]];
      exclusive(f.lastReceiver, "receive from rank " + std::to_string(f.from) + " on channel " +
                                    std::to_string(f.channel));
    }
    if (!opRecvs(st.op)) L.vc[g] = accessStamp(k);
    checkOverlap(g, me, st);
    L.started = true;
    L.slice = 0;
    L.nslices = std::max<uint64_t>(1, (st.count + slice_ - 1) / slice_);
    return true;
  }
  // Local steps access their elements until they end; a message's slice is done with the
  // elements it moves once it is sent or received.
  accessDone_ = endStamp(k);
  switch (st.op) {
    case Op::kNop:
      complete(g, me);
      return true;
    case Op::kCopy:
      if (sameElements(g, st.src, st.dst) && !reduction_) {
        copyInPlace(g, me, st);
      } else {
        write(g, me, st.dst, 0, read(g, me, st.src, 0, st.count));
      }
      complete(g, me);
      return true;
    case Op::kReduce: {
      Values d = read(g, me, st.dst, 0, st.count);
      reduce(me, d, read(g, me, st.src, 0, st.count));
      write(g, me, st.dst, 0, d);
      complete(g, me);
      return true;
    }
    default:
      break;
  }
  Fifo* in = recvFifo_[me] >= 0 ? &fifos_[recvFifo_[me]] : nullptr;
  Fifo* out = sendFifo_[me] >= 0 ? &fifos_[sendFifo_[me]] : nullptr;
  if (in && in->q.empty()) return false;
  if (out && out->q.size() >= static_cast<size_t>(slots_)) return false;
  const uint64_t off = L.slice * slice_;
  const uint64_t m = std::min(slice_, st.count - std::min(st.count, off));
  Values inc, fwd;
  if (in) {
    Slice& h = in->q.front();
    if (L.slice == 0) {
      if (h.msgCount != st.count)
        reject(mode() + describe(me) + " receives " + std::to_string(st.count) +
               " elements on channel " + std::to_string(in->channel) + " but " +
               describe(h.sender) + " sends " + std::to_string(h.msgCount));
      L.vc[g] = accessStamp(k);
      L.msgSender = h.sender;
    }
    join(L.vc, h.vc);
    inc = std::move(h.values);
    in->q.pop_front();
  }
  accessDone_ = sliceStamp(k, L.slice);
  switch (st.op) {
    case Op::kSend:
      fwd = read(g, me, st.src, off, m);
      break;
    case Op::kRecv:
      write(g, me, st.dst, off, inc);
      break;
    case Op::kRecvReduce: {
      Values d = read(g, me, st.dst, off, m);
      reduce(me, d, inc);
      write(g, me, st.dst, off, d);
      break;
    }
    case Op::kRecvCopySend:
      write(g, me, st.dst, off, inc);
      fwd = std::move(inc);
      break;
    case Op::kRecvReduceSend:
    case Op::kRecvReduceCopy:
    case Op::kRecvReduceCopySend: {
      fwd = read(g, me, st.src, off, m);
      reduce(me, fwd, inc);
      if (opWritesDst(st.op)) write(g, me, st.dst, off, fwd);
      break;
    }
    default:
      break;
  }
  // The executor releases each incoming slice before it forwards: a step's last slice goes
  // out after the sender's whole message was consumed (so a one-slice forward tells its
  // receiver that the sender has finished reading its source).
  if (in && L.slice + 1 == L.nslices) join(L.vc, vcEnd_[L.msgSender]);
  L.vc[g] = sliceStamp(k, L.slice);
  if (out) out->q.push_back(Slice{me, st.count, std::move(fwd), L.vc});
  if (++L.slice == L.nslices) complete(g, me);
  return true;
}

void Simulator::reportDeadlock() {
  std::vector<std::string> stuck;
  for (size_t g = 0; g < lanes_.size(); ++g) {
    const LaneRun& L = lanes_[g];
    const auto& steps = plan_.programs[L.rank].lanes[L.lane].steps;
    if (L.step >= steps.size()) continue;
    const Step& st = steps[L.step];
    int32_t me = gidBase_[g] + L.step;
    std::string why;
    if (!L.started) {
      for (const StepRef& d : st.deps)
        if (!completed_[gid(L.rank, d.lane, d.step)]) {
          why = "waits for " + describe(gid(L.rank, d.lane, d.step));
          break;
        }
    } else if (recvFifo_[me] >= 0 && fifos_[recvFifo_[me]].q.empty()) {
      why = "waits for data from rank " + std::to_string(st.recvPeer) + " on channel " +
            std::to_string(fifos_[recvFifo_[me]].channel);
    } else {
      why = "waits for a free slot towards rank " + std::to_string(st.sendPeer) + " on channel " +
            std::to_string(fifos_[sendFifo_[me]].channel);
    }
    stuck.push_back(describe(me) + " " + why);
  }
  if (stuck.empty()) return;
  std::string msg = mode() + "deadlock with FIFOs of " + std::to_string(slots_) + " slots of " +
                    std::to_string(slice_) + " elements: ";
  for (size_t i = 0; i < stuck.size() && i < 6; ++i) msg += (i ? "; " : "") + stuck[i];
  if (stuck.size() > 6) msg += "; and " + std::to_string(stuck.size() - 6) + " more lanes";
  reject(msg);
}

}  // namespace weft::plan::detail
