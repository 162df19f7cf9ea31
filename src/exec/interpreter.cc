#include "src/exec/interpreter.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "src/common/reduce.h"

namespace weft::exec {
namespace {

using plan::Op;

// advance(): progressed, and the lane should let the others run before it goes on.
constexpr int kYieldLane = 2;
// Local copies and reductions go this many bytes at a time between the other lanes' steps.
constexpr uint64_t kLocalSliceBytes = 256 * 1024;

std::atomic<uint64_t> gLandedSlices{0};

void copyBytes(char* dst, const void* src, size_t bytes, Store store) {
  if (dst != src) copyElements(DataType::kUint8, dst, src, bytes, nullptr, store);
}

}  // namespace

uint64_t landedSlices() { return gLandedSlices.load(std::memory_order_relaxed); }

void Interpreter::start(Work& w) {
  w_ = &w;
  lanes_.assign(w.program->lanes.size(), LaneState{});
  for (size_t l = 0; w.lanesDone != 0 && l < lanes_.size() && l < 64; ++l)
    if (w.lanesDone >> l & 1) lanes_[l].step = w.program->lanes[l].steps.size();
  outstanding_.clear();
  // A repeated call runs a Work of the same stamp: what was lowered from it stands.
  if (w.stamp == 0 || w.stamp != lowered_.stamp) lower(w, &lowered_);
  remaining_ = 0;
  for (size_t l = 0; l < lanes_.size(); ++l)
    if (lanes_[l].step < w.program->lanes[l].steps.size()) ++remaining_;
}

bool Interpreter::poll(Status* st, std::string* why, Stall* stall) {
  bool progress = false;
  for (size_t l = 0; l < lanes_.size(); ++l) {
    const auto& steps = w_->program->lanes[l].steps;
    LaneState& ls = lanes_[l];
    // Bounded burst per lane keeps lanes (and ranks driven by this thread) fair, or weighted by
    // the plan's lane shares.
    const uint32_t limit = lowered_.bursts.empty() ? kLaneBurst : lowered_.bursts[l];
    for (uint32_t burst = 0; burst < limit && ls.step < steps.size(); ++burst) {
      int r = advance(static_cast<int>(l), ls, steps[ls.step], st, why, stall);
      if (r < 0) return progress;
      if (r == 0) break;
      progress = true;
      if (ls.step == steps.size()) --remaining_;
      if (r == kYieldLane) break;
    }
  }
  // Messages already read are forgotten (drained()), so the list holds only those in flight.
  if (!drained() && remaining_ == 0)
    *stall = {-1, outstanding_.front().conn, outstanding_.front().peer};
  // Nothing else to do: help the peers that are reading our messages copy them.
  if (!progress && !outstanding_.empty() && assistReaders()) progress = true;
  return progress;
}

bool Interpreter::depsDone(const plan::Step& s) const {
  for (const auto& d : s.deps)
    if (lanes_[d.lane].step <= static_cast<size_t>(d.step)) return false;
  return true;
}

bool Interpreter::drained() {
  if (outstanding_.empty()) return true;
  std::erase_if(outstanding_, [](const Outstanding& o) { return o.refs->consumed(o.count); });
  return outstanding_.empty();
}

// Offers this rank's idle core to the receivers of its outstanding by-reference messages.
bool Interpreter::assistReaders() {
  bool any = false;
  transport::Connection* last = nullptr;
  for (const auto& o : outstanding_) {
    if (o.conn == last) continue;  // consecutive messages on one link: one call covers them
    last = o.conn;
    if (o.memory && o.memory->assist()) any = true;
  }
  return any;
}

// True while a peer may still be reading memory in [b, e): writing there must wait.
bool Interpreter::busy(const char* b, const char* e) {
  if (outstanding_.empty()) return false;
  for (const auto& o : outstanding_)
    if (o.begin < e && b < o.end && !o.refs->consumed(o.count)) return true;
  return false;
}

void Interpreter::sendByReference(LaneState& ls, const LoweredStep& low, int peer, const char* p,
                                  size_t bytes, uint32_t tag) {
  low.sendRefs->postReference(p, static_cast<uint32_t>(bytes), tag);
  outstanding_.push_back(
      {ls.send, low.sendRefs, low.sendMemory, low.sendRefs->postedCount(), p, p + bytes, peer});
}

void Interpreter::beginStep(int lane, LaneState& ls, const plan::Step& s) {
  LoweredStep& low = lowered_.at(static_cast<size_t>(lane), ls.step);
  if (!low.linked) {
    const plan::Lane& L = w_->program->lanes[lane];
    low.send =
        plan::opSends(s.op) ? w_->conns->connection(s.sendPeer, plan::sendChannelOf(L)) : nullptr;
    low.recv = plan::opRecvs(s.op) ? w_->conns->connection(s.recvPeer, L.channel) : nullptr;
    low.sendRefs = low.send ? low.send->referenceSends() : nullptr;
    low.sendMemory = low.send ? low.send->peerMemory() : nullptr;
    low.recvMemory = low.recv ? low.recv->peerMemory() : nullptr;
    // A mode the link cannot carry is off for good.
    low.mayLand = low.mayLand && low.sendMemory;
    low.mayRef = low.mayRef && low.sendRefs;
    low.bigRefs = low.bigRefs && low.sendRefs;
    low.offers = low.offers && low.recvMemory;
    low.linked = true;
  }
  ls.send = low.send;
  ls.recv = low.recv;
  ls.begun = true;
  ls.done = 0;
  if (low.offers && ls.step >= ls.landingEnd) offerLanding(lane, ls);
}

// 1: progressed, kYieldLane: progressed partway through a local step, 0: blocked, -1: error.
int Interpreter::advance(int lane, LaneState& ls, const plan::Step& s, Status* st, std::string* why,
                         Stall* stall) {
  if (!ls.begun) {
    if (!depsDone(s)) return 0;
    beginStep(lane, ls, s);
  }
  if (s.op == Op::kNop) return finishStep(ls);
  const LoweredStep& low = lowered_.at(static_cast<size_t>(lane), ls.step);
  if (s.op == Op::kCopy || s.op == Op::kReduce) return localStep(ls, s, low);
  return moveSlice(lane, ls, s, low, st, why, stall);
}

// A local copy or reduction, slice by slice, so the other lanes (sends peers are waiting for)
// move in between.
int Interpreter::localStep(LaneState& ls, const plan::Step& s, const LoweredStep& low) {
  // A copy onto itself (in-place) writes nothing, so a peer reading there is no obstacle.
  if (s.op == Op::kCopy && ptr(s.dst, 0) == ptr(s.src, 0) && !low.scaled) return finishStep(ls);
  const uint64_t es = lowered_.elemSize;
  const uint64_t n = std::min(std::max<uint64_t>(1, kLocalSliceBytes / es), s.count - ls.done);
  char* dst = ptr(s.dst, ls.done);
  if (busy(dst, dst + n * es)) return 0;
  if (n > 0) {
    const char* src = ptr(s.src, ls.done);
    if (s.op == Op::kCopy)
      copyElements(w_->type, dst, src, n, scale(low), low.store);
    else
      reduce(w_->type, w_->op, dst, dst, false, src, low.scaled, n, &w_->scalar);
  }
  ls.done += n;
  if (ls.done >= s.count) return finishStep(ls);
  return kYieldLane;
}

// One slice of a step that sends and/or receives.
int Interpreter::moveSlice(int lane, LaneState& ls, const plan::Step& s, const LoweredStep& low,
                           Status* st, std::string* why, Stall* stall) {
  const uint64_t es = lowered_.elemSize;
  size_t slot = (ls.send ? ls.send : ls.recv)->slotBytes();
  if (ls.send && ls.recv) slot = std::min(slot, ls.recv->slotBytes());
  const uint64_t sliceElems = std::max<uint64_t>(1, slot / es);
  uint64_t n = std::min(sliceElems, s.count - ls.done);
  const uint64_t d = ls.done;
  if (low.bigRefs && n < s.count - d) {
    // Whole slices (or the step's end), so the receiver's slices tile the message.
    const uint64_t most =
        std::min<uint64_t>(lowered_.bigRefBytes, low.sendRefs->maxReferenceBytes());
    const uint64_t slices = std::max<uint64_t>(1, most / (sliceElems * es));
    const uint64_t big = std::min(s.count - d, slices * sliceElems);
    if (big * es >= lowered_.rdvBytes && low.sendRefs->peerCanRead(ptr(s.src, d), big * es))
      n = big;
  }
  const size_t bytes = n * es;
  char* dst = plan::opWritesDst(s.op) ? ptr(s.dst, d) : nullptr;
  if (dst && busy(dst, dst + bytes)) return 0;

  // The receiver offered where this goes: store it there as it is produced.
  const uint32_t tag = w_->laneTags[lane];
  char* land = low.mayLand && bytes >= lowered_.rdvBytes
                   ? static_cast<char*>(low.sendMemory->landingFor(bytes, tag))
                   : nullptr;
  // A landing taken and then not written (the slice waits for its input, or fails) is handed
  // back: the receiver may not be left believing a write into its memory is under way.
  struct LandingHeld {
    transport::PeerMemory* memory;
    ~LandingHeld() {
      if (memory) memory->withdrawLanding();
    }
  } held{land ? low.sendMemory : nullptr};
  void* out = nullptr;
  if (ls.send && !land) {
    out = ls.send->sendSlotFor(bytes);
    if (!out) {
      *stall = {lane, ls.send, s.sendPeer};
      return 0;
    }
  }
  const void* in = nullptr;
  if (ls.recv) {
    uint32_t got = 0, gotTag = 0;
    uint64_t remote = 0;
    bool present = false;
    in = ls.recv->recvMessage(&got, &gotTag, &remote, &present);
    if (!present) {
      *stall = {lane, ls.recv, s.recvPeer};
      return 0;
    }
    // A message larger than the slice (a sender's large by-reference send) is taken a slice at
    // a time; one that runs past the step's end means the ranks' counts differ.
    const uint64_t at = ls.msgAt;
    const bool stepEnds = d + n >= s.count;
    if (gotTag != tag || got < at + bytes || (stepEnds && got != at + bytes)) {
      got = static_cast<uint32_t>(got - std::min<uint64_t>(got, at));
      *st = Status::kInvalidUsage;
      const std::string from = " from rank " + std::to_string(s.recvPeer);
      *why = "rank " + std::to_string(w_->rank) +
             (gotTag != tag
                  ? " got a message of another operation" + from + " (" + std::to_string(got) +
                        " bytes; it expected " + std::to_string(bytes) + " of this one)"
                  : " got " + std::to_string(got) + " bytes" + from + " where it expected " +
                        std::to_string(bytes)) +
             ": the ranks called mismatched operations (collective, count, type, op or root)";
      ls.recv->doneReading();
      return -1;
    }
    ls.msgAt = at + bytes < got ? at + bytes : 0;  // the rest stays for the next slices
    if (in) in = static_cast<const char*>(in) + at;
    if (remote) {
      // Another process's memory: one kernel copy, straight into place when nothing is
      // reduced, else into a cache-sized bounce buffer the reduction reads from.
      remote += at;
      const bool lands = s.op == Op::kRecv || s.op == Op::kRecvCopySend;
      void* target = lands ? static_cast<void*>(dst) : bounceFor(bytes);
      low.recvMemory->readRemote(target, remote, bytes);
      in = target;
    }
  }
  const char* refFrom = s.op == Op::kSend ? ptr(s.src, d) : dst;  // what a reference names
  const bool byRef = !land && low.mayRef && bytes >= lowered_.rdvBytes && bytes > 0 &&
                     low.sendRefs->peerCanRead(refFrom, bytes);
  const Scalar* sc = scale(low);
  const bool scaled = low.scaled;
  switch (s.op) {
    case Op::kSend:
      if (land)
        copyElements(w_->type, land, ptr(s.src, d), n, sc, low.landedStore);
      else if (byRef)
        sendByReference(ls, low, s.sendPeer, ptr(s.src, d), bytes, tag);
      else
        copyElements(w_->type, out, ptr(s.src, d), n, sc);
      break;
    case Op::kRecv:
      // A message the sender holds in place may be copied by both of us (PeerMemory::land).
      if (dst == in) break;
      if (low.recvMemory)
        low.recvMemory->land(dst, in, bytes, low.store);
      else
        copyBytes(dst, in, bytes, low.store);
      break;
    case Op::kRecvReduce:
      reduce(w_->type, w_->op, dst, dst, false, in, false, n, &w_->scalar);
      break;
    case Op::kRecvCopySend:
      if (land) {
        copyBytes(dst, in, bytes, low.landedStore);
        copyBytes(land, in, bytes, low.landedStore);
        break;
      }
      // What the peer reads by reference right away is better left in cache.
      copyBytes(dst, in, bytes, byRef ? Store::kCached : low.store);
      if (byRef)
        sendByReference(ls, low, s.sendPeer, dst, bytes, tag);
      else
        std::memcpy(out, dst, bytes);
      break;
    case Op::kRecvReduceSend:
      reduce(w_->type, w_->op, out, ptr(s.src, d), scaled, in, false, n, &w_->scalar);
      break;
    case Op::kRecvReduceCopy:
      reduce(w_->type, w_->op, dst, ptr(s.src, d), scaled, in, false, n, &w_->scalar, low.store);
      break;
    case Op::kRecvReduceCopySend:
      if (land) {
        // One pass over the operands feeds this rank's output and the receiver's.
        reduceTwice(w_->type, w_->op, dst, land, ptr(s.src, d), scaled, in, false, n, &w_->scalar,
                    low.landedStore);
      } else if (byRef) {
        reduce(w_->type, w_->op, dst, ptr(s.src, d), scaled, in, false, n, &w_->scalar);
        sendByReference(ls, low, s.sendPeer, dst, bytes, tag);
      } else {
        reduce(w_->type, w_->op, out, ptr(s.src, d), scaled, in, false, n, &w_->scalar);
        copyBytes(dst, out, bytes, low.store);
      }
      break;
    default:
      break;
  }
  if (ls.recv) {
    if (ls.msgAt == 0)
      ls.recv->release();
    else
      ls.recv->doneReading();  // the rest of the message is read by the next slices
  }
  if (land) {
    held.memory = nullptr;
    low.sendMemory->postLanded(static_cast<uint32_t>(bytes), tag);
    gLandedSlices.fetch_add(1, std::memory_order_relaxed);
  } else if (ls.send && !byRef) {
    ls.send->post(static_cast<uint32_t>(bytes), tag);
  }
  ls.done += n;
  if (ls.done >= s.count) return finishStep(ls);
  return 1;
}

// At the first of a lane's receives: offers the sender the destination of this run of receives
// (same peer, contiguous, and no dependencies after the first: a step that waits on another lane
// could let that lane's messages on this link in between, which a verified plan otherwise
// orders) to store into directly. Not where a peer may still read (our by-reference messages)
// or this rank's input lies (what it sends during the call).
void Interpreter::offerLanding(int lane, LaneState& ls) {
  const auto& steps = w_->program->lanes[lane].steps;
  const plan::Step& first = steps[ls.step];
  uint64_t elems = first.count;
  size_t j = ls.step + 1;
  for (; j < steps.size(); ++j) {
    const plan::Step &s = steps[j], &prev = steps[j - 1];
    if (s.op != Op::kRecv || s.recvPeer != first.recvPeer || !s.deps.empty() ||
        s.dst.buffer != first.dst.buffer || s.dst.offset != prev.dst.offset + prev.count)
      break;
    elems += s.count;
  }
  ls.landingEnd = j;
  const uint64_t bytes = elems * lowered_.elemSize;
  if (bytes < lowered_.landingBytes) return;
  char* dst = ptr(first.dst, 0);
  const char* in = lowered_.readsOwnInput ? w_->buffers[plan::kInput] : nullptr;
  const uint64_t inBytes = lowered_.inputBytes;
  if ((in && dst < in + inBytes && in < dst + bytes) || busy(dst, dst + bytes)) return;
  lowered_.at(static_cast<size_t>(lane), ls.step)
      .recvMemory->offerLanding(dst, bytes, w_->laneTags[lane]);
}

void* Interpreter::bounceFor(size_t bytes) {
  if (bounce_.size() < bytes) bounce_.resize(bytes);
  return bounce_.data();
}

int Interpreter::finishStep(LaneState& ls) {
  ++ls.step;
  ls.begun = false;
  ls.send = ls.recv = nullptr;
  return 1;
}

}  // namespace weft::exec
