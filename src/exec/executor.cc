#include "src/exec/executor.h"

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "src/common/clock.h"
#include "src/common/env.h"
#include "src/common/futex.h"
#include "src/common/log.h"
#include "src/common/reduce.h"

namespace weft::exec {
namespace {

using plan::Op;

struct LaneState {
  size_t step = 0;
  uint64_t done = 0;  // elements of the current step already processed
  bool begun = false;
  size_t landingEnd = 0;  // steps before this one were considered for a landing offer
  uint64_t msgAt = 0;  // bytes of the message being received taken by earlier slices
  transport::Connection* send = nullptr;
  transport::Connection* recv = nullptr;
};

// Why a poll could not continue; filled only when a step stalls.
struct Stall {
  int lane = -1;
  transport::Connection* waitingOn = nullptr;
  int peer = -1;
};

// A rendezvous message still being read by its receiver: the memory must not change meanwhile.
struct Outstanding {
  transport::Connection* conn;
  uint64_t count;  // consumed(count) means the receiver is done
  const char* begin;
  const char* end;
  int peer;
};

// Slices a lane moves before the next lane's turn, when all lanes weigh the same.
constexpr uint32_t kLaneBurst = 16;
// Largest call (count x ranks) whose ranks keep a shared core while they wait (CoreHold). 4
// ranks on 2 cores, us a call yielding against holding: alltoall 256 B 10.3-11.3 against
// 8.7-10.0, 64 KiB 14.8-16.4 against 14.1-14.9, 1 MiB 69.5 against 70.7 (no gain left);
// allgather, reduce-scatter and allreduce alike.
constexpr uint64_t kHoldBytes = 256 * 1024;
constexpr uint32_t kMaxLaneBurst = 1024;

// advance(): progressed, and the lane should let the others run before it goes on.
constexpr int kYieldLane = 2;
// Local copies and reductions go this many bytes at a time between the other lanes' steps.
constexpr uint64_t kLocalSliceBytes = 256 * 1024;

// Whether [a, a + aBytes) and [b, b + bBytes) share no byte.
bool disjoint(const char* a, uint64_t aBytes, const char* b, uint64_t bBytes) {
  return a + aBytes <= b || b + bBytes <= a;
}

uint64_t bytesFromEnv(const char* name) {
  return static_cast<uint64_t>(std::max<int64_t>(0, env::getInt(name)));
}

// Streaming stores for an output once the input and output a rank touches in one call come to
// this many bytes (WEFT_STREAM_BYTES; 0: never). Such an output has left the cache before anyone
// rereads it, so skipping the read-for-ownership of each line saves a third of a copy's memory
// traffic. Input and output together decide, not the output alone. For copies (allgather,
// alltoall, broadcast, gather, scatter) that pays only once the buffers outgrow what the caches
// keep between calls: 2 ranks, us a call out of place / in place, with 3 MiB against 16 MiB,
// allgather 4 MiB 137-210 / 75-79 against 102-118 / 53-64, broadcast 8 MiB 306-360 / 205-209
// against 269-288 / 160-172, scatter 8 MiB 260-273 / 103-109 against 167-182 / 75-77. The
// crossover lies between 16 and 24 MiB touched: with 20 MiB against 16, alltoall 8 MiB (16
// touched) 246-272 against 278-297, allgather 16 MiB in place 267-298 against 305-425, while
// allgather 16 MiB out of place (24 touched) streams: 641-680 against 762-816 cached.
uint64_t streamOutputBytes() {
  static const uint64_t v = bytesFromEnv("WEFT_STREAM_BYTES");
  return v;
}

}  // namespace

// 4 ranks on 2 cores, 16 MiB broadcast, GB/s out of place / in place: 7.6-9.4 / 6.7-7.4 cached
// against 9.4-11.4 / 8.0-8.7 streamed (a fast spell), 4.7-5.8 / 5.2-6.1 against 5.6-6.4 /
// 5.4-5.7 (a slow one); alltoall 8 MiB (counted 32) 5.3-6.5 against 6.6-8.8 out of place; 8 MiB
// broadcasts (counted 16) alike either way, so they stay cached.
uint64_t copyFootprint(uint64_t touched) {
  const int ranks = ranksOnHost();
  return ranks > 2 ? touched * static_cast<uint64_t>(ranks) / 2 : touched;
}

namespace {

// The same for reduce-scatter and reduce outputs (WEFT_STREAM_REDUCE_BYTES), which stream from
// a few MiB: 2 ranks, 2 MiB reduce-scatter 44 us a call streamed against 59 cached, 4 MiB 81
// against 109, 8 MiB 191 against 245.
uint64_t streamReduceBytes() {
  static const uint64_t v = bytesFromEnv("WEFT_STREAM_REDUCE_BYTES");
  return v;
}

// The same for allreduce outputs (WEFT_STREAM_ALLREDUCE_BYTES; 0: never). Peers read an
// allreduce's reduced blocks again right away (its allgather half), so they pay to stay cached
// for as long as the ranks' buffers fit the cache: 2 ranks of 16 MiB ran at 9.8 GB/s cached
// against 8.7 streamed, 4 ranks of 4-8 MiB 5.6 against 4.5, and from 32 MiB streaming won.
uint64_t streamAllReduceBytes() {
  static const uint64_t v = bytesFromEnv("WEFT_STREAM_ALLREDUCE_BYTES");
  return v;
}

// The same for results that a step also stores into a peer's landing
// (WEFT_STREAM_LANDED_BYTES): nobody rereads those, so they stream where an allreduce's own
// outputs stay cached (2 ranks, fused reduce and forward: 16 MiB 12.6-12.7 GB/s streamed against
// 11.5-11.7 cached; 8 MiB 11.6-11.8 against 11.4; 4 MiB 9.8 against 10.7).
uint64_t streamLandedBytes() {
  static const uint64_t v = bytesFromEnv("WEFT_STREAM_LANDED_BYTES");
  return v;
}

// Largest message a plain send passes by reference when ranks outnumber the cores
// (WEFT_SHARED_REF_BYTES; 0: one slice a message). Its receiver still copies it a slice at a
// time, but releases it, and so wakes the sender, once: 4 ranks on 2 cores, 128 MiB broadcast, a
// root woken for each of 3 x 1024 slices ran 2.8-4.1 GB/s out of place, with 4 MiB messages
// 6.0-6.3. With a core per rank the sender waits awake, and one slice a message keeps it busy.
uint64_t sharedCoreRefBytes() {
  static const uint64_t v = bytesFromEnv("WEFT_SHARED_REF_BYTES");
  return v;
}

// Smallest run of receives offered to the sender as a landing (WEFT_LANDING_BYTES; 0: never).
uint64_t landingBytes() {
  static const uint64_t v = bytesFromEnv("WEFT_LANDING_BYTES");
  return v;
}

std::atomic<uint64_t> gLandedSlices{0};

// Steps whose sends may store their data straight into the receiver's landing: forwards of
// what this rank also keeps (a partial sum, reduce-send, goes on to be reduced again, never
// into a plain receive the built-in plans offer).
bool mayLand(Op op) { return op == Op::kRecvReduceCopySend || op == Op::kRecvCopySend; }

// Smallest slice sent by reference instead of by copy (WEFT_RDV_BYTES; auto: by the ranks per
// core). With a core per rank the receiver's one copy out of the sender's memory beats the
// sender's copy into a slot and the receiver's out of it from a few KiB up: 2 ranks, us per call,
// broadcast 8 KiB 0.58-0.69 by reference against 0.96-1.13, allgather 16 KiB 0.76-1.05 against
// 1.02-2.26 (4 KiB: 0.55-0.66 against 0.68-0.81; 2 KiB slices gain nothing). With more ranks
// than cores a sender that waits for its reader waits for a descheduled one: 4 ranks' chained
// 8-16 KiB broadcasts ran 5.3-6.8 by reference against 2.3-4.5.
int64_t rendezvousSetting() {
  const std::string v = env::get("WEFT_RDV_BYTES");
  if (v == "auto") return -1;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 0);
  if (v.empty() || *end != '\0' || x < 0) {
    WEFT_WARN(ENV, "WEFT_RDV_BYTES=%s is neither a byte count nor auto; using auto", v.c_str());
    return -1;
  }
  return x;
}

class WorkRunner {
 public:
  // Starts on `w`; `lanes` is storage the caller reuses from run to run, and so is the runner
  // (its buffers stay allocated between Works).
  void start(Work& w, std::vector<LaneState>& lanes) {
    w_ = &w;
    lanes_ = &lanes;
    lanes.assign(w.program->lanes.size(), LaneState{});
    for (size_t l = 0; w.lanesDone != 0 && l < lanes.size() && l < 64; ++l)
      if (w.lanesDone >> l & 1) lanes[l].step = w.program->lanes[l].steps.size();
    outstanding_.clear();
    // A repeated call runs a Work of the same stamp: what follows from it stands.
    if (w.stamp == 0 || w.stamp != preparedStamp_) {
      prepare(w);
      preparedStamp_ = w.stamp;
    }
  }

  // What the executor derives from a Work before running it: thresholds, store kinds, bursts.
  void prepare(const Work& w) {
    laneLinks_.assign(w.program->lanes.size(), 0);
    size_t steps = 0;
    for (size_t l = 0; l < w.program->lanes.size(); ++l) {
      laneLinks_[l] = steps;
      steps += w.program->lanes[l].steps.size();
    }
    stepLinks_.assign(steps, StepLinks{});
    streamOutput_ = streamLanded_ = false;
    rdvBytes_ = rendezvousBytes(w.plan->spec.coll == plan::Collective::kAllReduce &&
                                w.buffers[plan::kInput] == w.buffers[plan::kOutput]);
    largeRefs_ = oversubscribed() && sharedCoreRefBytes() > 0 && inputApart(w);
    inputBegin_ = inputEnd_ = nullptr;
    elemSize_ = dataTypeSize(w.type);
    holdsCore_ = exchangesLittle(w);
    premul_ = w.op == RedOp::kPreMulSum;
    bursts_.clear();
    for (const auto& lane : w.program->lanes)
      if (lane.share != 1) {
        bursts_ = laneBursts(*w.program);
        break;
      }
    // No rank's input or output exceeds count x nranks elements: small calls skip the sizes.
    const plan::Spec& spec = w.plan->spec;
    const bool allReduce = spec.coll == plan::Collective::kAllReduce;
    const uint64_t most = 2 * spec.count * static_cast<uint64_t>(spec.nranks) * elemSize_;
    const bool reduces = spec.coll == plan::Collective::kReduceScatter ||
                         spec.coll == plan::Collective::kReduce;
    const uint64_t least = allReduce  ? streamAllReduceBytes()
                           : reduces ? streamReduceBytes()
                                     : streamOutputBytes();
    const uint64_t leastLanded = streamLandedBytes();
    if ((least == 0 || copyFootprint(most) < least) && (leastLanded == 0 || most < leastLanded))
      return;
    const plan::BufferSizes sizes = plan::bufferSizes(spec, w.rank);
    const uint64_t outBytes = sizes.output * elemSize_;
    // Only input this rank reads counts.
    if (readsOwnInput(w)) {
      inputBegin_ = w.buffers[plan::kInput];
      inputEnd_ = inputBegin_ ? inputBegin_ + sizes.input * elemSize_ : nullptr;
    }
    // What the call makes this rank touch: its output, and an input of its own beside it.
    const char* out = w.buffers[plan::kOutput];
    const bool apart =
        inputBegin_ && (!out || disjoint(out, outBytes, inputBegin_, inputEnd_ - inputBegin_));
    const uint64_t touched = outBytes + (apart ? sizes.input * elemSize_ : 0);
    const uint64_t weighed = allReduce ? outBytes : reduces ? touched : copyFootprint(touched);
    streamOutput_ = least != 0 && weighed >= least;
    streamLanded_ = leastLanded != 0 && outBytes >= leastLanded;
  }

  // Whether the rank reads its input: a broadcast or scatter reads the root's alone.
  static bool readsOwnInput(const Work& w) {
    const plan::Spec& spec = w.plan->spec;
    const bool rootOnly = spec.coll == plan::Collective::kBroadcast ||
                          spec.coll == plan::Collective::kScatter;
    return !rootOnly || spec.root == w.rank;
  }

  static bool exchangesLittle(const Work& w) {
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

  // Whether the call never writes the input it sends from: input and output apart, or a
  // broadcast (whose root, in place, writes nothing).
  static bool inputApart(const Work& w) {
    const plan::Spec& spec = w.plan->spec;
    if (spec.coll == plan::Collective::kBroadcast) return true;
    const char* in = w.buffers[plan::kInput];
    const char* out = w.buffers[plan::kOutput];
    if (!in || !out) return true;
    const plan::BufferSizes sizes = plan::bufferSizes(spec, w.rank);
    const size_t es = dataTypeSize(w.type);
    return disjoint(out, sizes.output * es, in, sizes.input * es);
  }

  // Whether this rank may keep a shared core while it waits (CoreHold): it both sends and
  // receives, and little, so a context switch costs more than the call's work. A rank that
  // only receives (a broadcast's) or only sends gains nothing: its FIFOs already let it run
  // several calls a turn (4 ranks, 256 B broadcast: 0.50-0.55 us a call yielding, 0.55-0.62
  // holding).
  bool holdsCore() const { return holdsCore_; }

  // Calls f(connection, peer) for every link a lane's begun step waits on and every peer still
  // reading our messages, until f returns false; returns whether all passed. A stalled poll
  // names one of them only, and a peer that died on another must not go unnoticed.
  template <class F>
  bool everyAwaitedLink(F&& f) const {
    for (size_t l = 0; l < lanes_->size(); ++l) {
      const LaneState& ls = (*lanes_)[l];
      if (!ls.begun) continue;
      const plan::Step& s = w_->program->lanes[l].steps[ls.step];
      if (ls.send && !f(ls.send, s.sendPeer, false)) return false;
      if (ls.recv && !f(ls.recv, s.recvPeer, true)) return false;
    }
    for (const auto& o : outstanding_)
      if (!f(o.conn, o.peer, false)) return false;
    return true;
  }

  // Done when every lane finished and every peer finished reading our memory.
  bool complete() { return remaining_ == 0 && drained(); }

  void begin() {
    remaining_ = 0;
    for (size_t l = 0; l < lanes_->size(); ++l)
      if ((*lanes_)[l].step < w_->program->lanes[l].steps.size()) ++remaining_;
  }

  // Advances every lane as far as it can; returns true if anything moved.
  bool poll(Status* st, std::string* why, Stall* stall) {
    bool progress = false;
    for (size_t l = 0; l < lanes_->size(); ++l) {
      const auto& steps = w_->program->lanes[l].steps;
      LaneState& ls = (*lanes_)[l];
      // Bounded burst per lane keeps lanes (and ranks driven by this thread) fair, or weighted
      // by the plan's lane shares.
      const uint32_t limit = bursts_.empty() ? kLaneBurst : bursts_[l];
      for (uint32_t burst = 0; burst < limit && ls.step < steps.size(); ++burst) {
        int r = advance(static_cast<int>(l), ls, steps[ls.step], st, why, stall);
        if (r < 0) return progress;
        if (r == 0) break;
        progress = true;
        if (ls.step == steps.size()) --remaining_;
        if (r == kYieldLane) break;
      }
    }
    // Forget messages already read, so the list holds only those in flight (a few per link):
    // kept to the end of a large call it grew to thousands, walked on every poll (4 ranks'
    // 128 MiB broadcast spent its root's core walking it).
    if (!drained() && remaining_ == 0)
      *stall = {-1, outstanding_.front().conn, outstanding_.front().peer};
    // Nothing else to do: help the peers that are reading our messages copy them.
    if (!progress && !outstanding_.empty() && assistReaders()) progress = true;
    return progress;
  }

 private:
  char* ptr(const plan::Ref& ref, uint64_t extra) const {
    return w_->buffers[ref.buffer] + (ref.offset + extra) * elemSize_;
  }
  // Final results in a large output are streamed; slots, scratch and the input stay cached, and
  // so does output over the input (in place), whose lines this rank has just read or sent.
  // `landed`: the result also lands in a peer's memory (streamLanded_ decides).
  Store storeFor(const plan::Ref& ref, const char* dst, size_t bytes, bool landed = false) const {
    const bool overInput = dst < inputEnd_ && inputBegin_ < dst + bytes;
    return (landed ? streamLanded_ : streamOutput_) && ref.buffer == plan::kOutput && !overInput
               ? Store::kStreaming
               : Store::kCached;
  }
  void copyBytes(char* dst, const void* src, size_t bytes, Store store) {
    if (dst != src) copyElements(DataType::kUint8, dst, src, bytes, nullptr, store);
  }
  const Scalar* scaleFor(const plan::Ref& ref) const {
    return premul_ && ref.buffer == plan::kInput ? &w_->scalar : nullptr;
  }

  bool depsDone(const plan::Step& s) const {
    for (const auto& d : s.deps)
      if ((*lanes_)[d.lane].step <= static_cast<size_t>(d.step)) return false;
    return true;
  }

  bool drained() {
    if (outstanding_.empty()) return true;
    std::erase_if(outstanding_, [](const Outstanding& o) { return o.conn->consumed(o.count); });
    return outstanding_.empty();
  }

  // Offers this rank's idle core to the receivers of its outstanding rendezvous messages.
  bool assistReaders() {
    bool any = false;
    transport::Connection* last = nullptr;
    for (const auto& o : outstanding_) {
      if (o.conn == last) continue;  // consecutive messages on one link: one call covers them
      last = o.conn;
      if (o.conn->assist()) any = true;
    }
    return any;
  }

  // True while a peer may still be reading memory in [b, e): writing there must wait.
  bool busy(const char* b, const char* e) {
    if (outstanding_.empty()) return false;
    for (const auto& o : outstanding_)
      if (o.begin < e && b < o.end && !o.conn->consumed(o.count)) return true;
    return false;
  }

  void sendByReference(transport::Connection* conn, int peer, const char* p, size_t bytes,
                       uint32_t tag) {
    conn->postRemote(p, static_cast<uint32_t>(bytes), tag);
    outstanding_.push_back({conn, conn->postedCount(), p, p + bytes, peer});
  }

  // 1: progressed, kYieldLane: progressed partway through a local step, 0: blocked, -1: error.
  int advance(int lane, LaneState& ls, const plan::Step& s, Status* st, std::string* why,
              Stall* stall) {
    if (!ls.begun) {
      if (!depsDone(s)) return 0;
      StepLinks& known = stepLinks_[laneLinks_[lane] + ls.step];
      if (!known.known) {
        const plan::Lane& L = w_->program->lanes[lane];
        known.send = plan::opSends(s.op)
                         ? w_->conns->connection(s.sendPeer, plan::sendChannelOf(L))
                         : nullptr;
        known.recv = plan::opRecvs(s.op) ? w_->conns->connection(s.recvPeer, L.channel) : nullptr;
        known.known = true;
      }
      ls.send = known.send;
      ls.recv = known.recv;
      ls.begun = true;
      ls.done = 0;
      if (s.op == Op::kRecv && ls.step >= ls.landingEnd) offerLanding(lane, ls);
    }
    if (s.op == Op::kNop) return finishStep(ls);
    if (s.op == Op::kCopy || s.op == Op::kReduce) {
      // A copy onto itself (in-place) writes nothing, so a peer reading there is no obstacle.
      if (s.op == Op::kCopy && ptr(s.dst, 0) == ptr(s.src, 0) && !scaleFor(s.src))
        return finishStep(ls);
      // Slice by slice, so the other lanes (sends peers are waiting for) move in between.
      const uint64_t n = std::min(localSliceElems(), s.count - ls.done);
      char* dst = ptr(s.dst, ls.done);
      if (busy(dst, dst + n * elemSize_)) return 0;
      localSlice(s, ls.done, n);
      ls.done += n;
      if (ls.done >= s.count) return finishStep(ls);
      return kYieldLane;
    }
    size_t slot = (ls.send ? ls.send : ls.recv)->slotBytes();
    if (ls.send && ls.recv) slot = std::min(slot, ls.recv->slotBytes());
    uint64_t sliceElems = std::max<uint64_t>(1, slot / elemSize_);
    uint64_t n = std::min(sliceElems, s.count - ls.done);
    const uint64_t d = ls.done;
    if (largeRefs_ && s.op == Op::kSend && n < s.count - d && w_->byReference && !scaleFor(s.src)) {
      // Whole slices (or the step's end), so the receiver's slices tile the message.
      const uint64_t most = std::min<uint64_t>(sharedCoreRefBytes(), ls.send->maxReferenceBytes());
      const uint64_t slices = std::max<uint64_t>(1, most / (sliceElems * elemSize_));
      const uint64_t big = std::min(s.count - d, slices * sliceElems);
      if (big * elemSize_ >= rdvBytes_ && ls.send->peerCanRead(ptr(s.src, d), big * elemSize_))
        n = big;
    }
    const size_t bytes = n * elemSize_;
    char* dst = plan::opWritesDst(s.op) ? ptr(s.dst, d) : nullptr;
    if (dst && busy(dst, dst + bytes)) return 0;

    void* out = nullptr;
    // The receiver offered where this goes: store it there as it is produced (and a push
    // lane's plain sends too, see plan::Lane::push).
    const bool pushes = s.op == Op::kSend && w_->program->lanes[lane].push;
    char* land = ls.send && (mayLand(s.op) || pushes) && landingBytes() && bytes >= rdvBytes_
                     ? static_cast<char*>(ls.send->landingFor(bytes, w_->laneTags[lane]))
                     : nullptr;
    if (ls.send && !land) {
      out = ls.send->sendSlotFor(bytes);
      if (!out) {
        *stall = {lane, ls.send, s.sendPeer};
        return 0;
      }
    }
    const void* in = nullptr;
    uint64_t remote = 0;
    if (ls.recv) {
      uint32_t got = 0, tag = 0;
      bool present = false;
      in = ls.recv->recvMessage(&got, &tag, &remote, &present);
      if (!present) {
        *stall = {lane, ls.recv, s.recvPeer};
        return 0;
      }
      // A message larger than the slice (a sender's large by-reference send) is taken a slice
      // at a time; one that runs past the step's end means the ranks' counts differ.
      const uint64_t at = ls.msgAt;
      const bool stepEnds = d + n >= s.count;
      if (tag != w_->laneTags[lane] || got < at + bytes || (stepEnds && got != at + bytes)) {
        got = static_cast<uint32_t>(got - std::min<uint64_t>(got, at));
        *st = Status::kInvalidUsage;
        const std::string from = " from rank " + std::to_string(s.recvPeer);
        *why = "rank " + std::to_string(w_->rank) +
               (tag != w_->laneTags[lane]
                    ? " got a message of another operation" + from + " (" + std::to_string(got) +
                          " bytes; it expected " + std::to_string(bytes) + " of this one)"
                    : " got " + std::to_string(got) + " bytes" + from + " where it expected " +
                          std::to_string(bytes)) +
               ": the ranks called mismatched operations (collective, count, type, op or root)";
        return -1;
      }
      if (at + bytes < got) ls.msgAt = at + bytes;  // the rest stays for the next slices
      else ls.msgAt = 0;
      if (in) in = static_cast<const char*>(in) + at;
      if (remote) remote += at;
      if (remote) {
        // Another process's memory: one kernel copy, straight into place when nothing is
        // reduced, else into a cache-sized bounce buffer the reduction reads from.
        bool lands = s.op == Op::kRecv || s.op == Op::kRecvCopySend;
        void* target = lands ? static_cast<void*>(dst) : bounceFor(bytes);
        ls.recv->readRemote(target, remote, bytes);
        in = target;
      }
    }
    const char* refFrom = s.op == Op::kSend ? ptr(s.src, d) : dst;  // what a reference names
    const bool byRef = !land && w_->byReference && ls.send && bytes >= rdvBytes_ &&
                       bytes > 0 && s.op != Op::kRecvReduceSend &&
                       !(s.op == Op::kSend && scaleFor(s.src)) && ls.send->peerCanRead(refFrom, bytes);
    const uint32_t tag = w_->laneTags[lane];
    switch (s.op) {
      case Op::kSend:
        if (land)
          copyElements(w_->type, land, ptr(s.src, d), n, scaleFor(s.src),
                       streamLanded_ ? Store::kStreaming : Store::kCached);
        else if (byRef) sendByReference(ls.send, s.sendPeer, ptr(s.src, d), bytes, tag);
        else copyElements(w_->type, out, ptr(s.src, d), n, scaleFor(s.src));
        break;
      case Op::kRecv:
        // A message the sender holds in place may be copied by both of us (Connection::land).
        if (dst != in) ls.recv->land(dst, in, bytes, storeFor(s.dst, dst, bytes));
        break;
      case Op::kRecvReduce:
        reduce(w_->type, w_->op, dst, dst, false, in, false, n, &w_->scalar);
        break;
      case Op::kRecvCopySend:
        if (land) {
          const Store store = storeFor(s.dst, dst, bytes, /*landed=*/true);
          copyBytes(dst, in, bytes, store);
          copyBytes(land, in, bytes, store);
          break;
        }
        // What the peer reads by reference right away is better left in cache.
        copyBytes(dst, in, bytes, byRef ? Store::kCached : storeFor(s.dst, dst, bytes));
        if (byRef) sendByReference(ls.send, s.sendPeer, dst, bytes, tag);
        else std::memcpy(out, dst, bytes);
        break;
      case Op::kRecvReduceSend:
        reduce(w_->type, w_->op, out, ptr(s.src, d), scaleFor(s.src) != nullptr, in, false, n,
               &w_->scalar);
        break;
      case Op::kRecvReduceCopy:
        reduce(w_->type, w_->op, dst, ptr(s.src, d), scaleFor(s.src) != nullptr, in, false, n,
               &w_->scalar, storeFor(s.dst, dst, bytes));
        break;
      case Op::kRecvReduceCopySend:
        if (land) {
          // One pass over the operands feeds this rank's output and the receiver's.
          reduceTwice(w_->type, w_->op, dst, land, ptr(s.src, d), scaleFor(s.src) != nullptr, in,
                      false, n, &w_->scalar, storeFor(s.dst, dst, bytes, /*landed=*/true));
        } else if (byRef) {
          reduce(w_->type, w_->op, dst, ptr(s.src, d), scaleFor(s.src) != nullptr, in, false, n,
                 &w_->scalar);
          sendByReference(ls.send, s.sendPeer, dst, bytes, tag);
        } else {
          reduce(w_->type, w_->op, out, ptr(s.src, d), scaleFor(s.src) != nullptr, in, false, n,
                 &w_->scalar);
          copyBytes(dst, out, bytes, storeFor(s.dst, dst, bytes));
        }
        break;
      default: break;
    }
    if (ls.recv && ls.msgAt == 0) ls.recv->release();
    if (land) {
      ls.send->postLanded(static_cast<uint32_t>(bytes), tag);
      gLandedSlices.fetch_add(1, std::memory_order_relaxed);
    } else if (ls.send && !byRef) {
      ls.send->post(static_cast<uint32_t>(bytes), tag);
    }
    ls.done += n;
    if (ls.done >= s.count) return finishStep(ls);
    return 1;
  }

  // At the first of a lane's receives: offers the sender the destination of this run of
  // receives (same peer, contiguous, and no dependencies after the first: a step that waits on
  // another lane could let that lane's messages on this link in between, which a verified plan
  // otherwise orders) to store into directly. Not where a peer may still read (our by-reference
  // messages) or this rank's input lies (what it sends during the call).
  void offerLanding(int lane, LaneState& ls) {
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
    const uint64_t bytes = elems * elemSize_;
    if (landingBytes() == 0 || bytes < landingBytes()) return;
    char* dst = ptr(first.dst, 0);
    const char* in = readsOwnInput(*w_) ? w_->buffers[plan::kInput] : nullptr;
    const uint64_t inBytes = plan::bufferSizes(w_->plan->spec, w_->rank).input * elemSize_;
    if ((in && dst < in + inBytes && in < dst + bytes) || busy(dst, dst + bytes)) return;
    ls.recv->offerLanding(dst, bytes, w_->laneTags[lane]);
  }

  void* bounceFor(size_t bytes) {
    if (bounce_.size() < bytes) bounce_.resize(bytes);
    return bounce_.data();
  }

  uint64_t localSliceElems() const {
    return std::max<uint64_t>(1, kLocalSliceBytes / elemSize_);
  }

  void localSlice(const plan::Step& s, uint64_t from, uint64_t n) {
    if (n == 0) return;
    char* dst = ptr(s.dst, from);
    const char* src = ptr(s.src, from);
    const Scalar* scale = scaleFor(s.src);
    if (s.op == Op::kCopy) copyElements(w_->type, dst, src, n, scale, storeFor(s.dst, dst, n * elemSize_));
    else reduce(w_->type, w_->op, dst, dst, false, src, scale != nullptr, n, &w_->scalar);
  }

  static int finishStep(LaneState& ls) {
    ++ls.step;
    ls.begun = false;
    ls.send = ls.recv = nullptr;
    return 1;
  }

  Work* w_ = nullptr;
  std::vector<LaneState>* lanes_ = nullptr;
  // Each step's links, looked up once and kept while a Work of the same stamp runs again (a
  // link, once opened, lasts as long as its communicator, and another Work has another stamp).
  struct StepLinks {
    transport::Connection* send = nullptr;
    transport::Connection* recv = nullptr;
    bool known = false;
  };
  std::vector<StepLinks> stepLinks_;  // lane l's steps from laneLinks_[l] on
  std::vector<size_t> laneLinks_;
  uint64_t preparedStamp_ = 0;  // the stamp of the Work prepare() last ran for
  std::vector<Outstanding> outstanding_;
  std::vector<uint32_t> bursts_;  // per lane, when the plan's lane shares differ; else empty
  std::vector<char> bounce_;
  size_t elemSize_ = 1;
  size_t rdvBytes_ = 0;  // smallest slice sent by reference in this Work
  bool largeRefs_ = false;  // plain sends by reference go as messages of several slices
  bool holdsCore_ = false;
  bool premul_ = false;
  bool streamOutput_ = false;
  bool streamLanded_ = false;
  const char* inputBegin_ = nullptr;
  const char* inputEnd_ = nullptr;
  size_t remaining_ = 0;
};

struct TaskState {
  size_t unit = 0;
  WorkRunner runner;  // kept from run to run, with its buffers
  bool running = false;
  Stall stall;
  std::vector<LaneState> lanes;  // the runner's, kept for the next run
};

bool startUnit(Task& t, TaskState& ts) {
  while (ts.unit < t.units.size()) {
    ts.runner.start(t.units[ts.unit], ts.lanes);
    ts.running = true;
    ts.runner.begin();
    if (!ts.runner.complete()) return true;
    if (t.units[ts.unit].finish) t.units[ts.unit].finish();
    ++ts.unit;
  }
  ts.running = false;
  return false;
}

void napNs(uint64_t ns) {
  timespec ts{0, static_cast<long>(ns)};
  nanosleep(&ts, nullptr);
}

// Per-task state of one thread's runs, reused so a run allocates nothing once warm (a TaskSet
// resets its runners when it ends).
std::vector<TaskState>& reusedStates(std::vector<TaskState>& states, size_t tasks) {
  if (states.size() < tasks) states.resize(tasks);
  for (size_t i = 0; i < tasks; ++i) {
    states[i].unit = 0;
    states[i].stall = {};
  }
  return states;
}

// Drives a set of tasks; each poll advances every runnable lane once.
class TaskSet {
 public:
  TaskSet(std::vector<Task>& tasks, std::vector<TaskState>& states)
      : tasks_(tasks), states_(reusedStates(states, tasks.size())) {}
  ~TaskSet() {
    for (size_t i = 0; i < tasks_.size(); ++i) states_[i].running = false;
  }

  // Starts the first unit of every task; false (and `error_`) on failure.
  bool start() {
    try {
      for (size_t i = 0; i < tasks_.size(); ++i)
        if (startUnit(tasks_[i], states_[i])) ++active_;
    } catch (const Error& e) {
      error_ = {e.code(), e.what(), 0};
      return false;
    }
    return true;
  }

  size_t active() const { return active_; }
  RunResult& error() { return error_; }

  // Returns true on progress; on failure sets error() and returns false with failed() true.
  bool poll() {
    bool progress = false;
    for (size_t i = 0; i < tasks_.size(); ++i) {
      TaskState& ts = states_[i];
      if (!ts.running) continue;
      Work& w = tasks_[i].units[ts.unit];
      if (w.abort && w.abort->load(std::memory_order_relaxed)) {
        error_ = {Status::kRemoteError, "operation aborted on rank " + std::to_string(w.rank),
                  static_cast<int>(i)};
        return false;
      }
      ts.stall = {};
      try {
        if (ts.runner.poll(&error_.status, &error_.message, &ts.stall)) progress = true;
        if (error_.status != Status::kSuccess) {
          error_.failedTask = static_cast<int>(i);
          return false;
        }
        if (ts.runner.complete()) {
          if (w.finish) w.finish();
          ++ts.unit;
          if (!startUnit(tasks_[i], ts)) --active_;
          progress = true;
        }
      } catch (const Error& e) {
        error_ = {e.code(), e.what(), static_cast<int>(i)};
        return false;
      }
    }
    return progress;
  }
  bool failed() const { return error_.status != Status::kSuccess; }

  // Whether every running task's Work may keep a shared core while it waits.
  bool holdsCore() const {
    for (size_t i = 0; i < tasks_.size(); ++i)
      if (states_[i].running && !states_[i].runner.holdsCore()) return false;
    return true;
  }

  // Calls f(peer) for every rank a running task's lanes wait on, until f returns false.
  template <class F>
  void everyAwaitedPeer(F&& f) const {
    for (size_t i = 0; i < tasks_.size(); ++i)
      if (states_[i].running &&
          !states_[i].runner.everyAwaitedLink([&](transport::Connection*, int peer, bool) {
            return f(peer);
          }))
        return;
  }

  // A link whose peer ended it (a finished peer says goodbye so; a failed one too) fails this
  // rank only where a lane waits on it in vain: a receiver the link holds nothing more for, or a
  // sender without a free slot. A lane that began a step on it but waits on another link is fine.
  static bool waitsInVain(transport::Connection* c, bool receiving) {
    uint32_t bytes = 0, tag = 0;
    return receiving ? c->recvSlot(&bytes, &tag) == nullptr : c->sendSlot() == nullptr;
  }

  // A peer that poisoned the link we wait on has failed: give up now.
  bool checkPoison() {
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (!states_[i].running) continue;
      states_[i].runner.everyAwaitedLink([&](transport::Connection* c, int peer, bool receiving) {
        if (c->peerEnded()) {
          if (!waitsInVain(c, receiving)) return true;
          error_ = {Status::kRemoteError,
                    "rank " + std::to_string(peer) + " closed its " + c->transportName() +
                        " link while this rank still waited on it (it exited or gave up)",
                    static_cast<int>(i)};
          return false;
        }
        if (!c->poisoned()) return true;
        error_ = {Status::kRemoteError,
                  "rank " + std::to_string(peer) + " failed and abandoned the operation (" +
                      c->transportName() + " link)",
                  static_cast<int>(i)};
        return false;
      });
      if (failed()) return false;
    }
    return true;
  }

  bool checkHealth() {
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (!states_[i].running) continue;
      states_[i].runner.everyAwaitedLink([&](transport::Connection* c, int, bool receiving) {
        if (c->peerEnded() && !waitsInVain(c, receiving)) return true;
        std::string why;
        const Status st = c->health(&why);
        if (st == Status::kSuccess) return true;
        error_ = {st, why, static_cast<int>(i)};
        return false;
      });
      if (failed()) return false;
    }
    return true;
  }

  RunResult timedOut(std::chrono::milliseconds timeout) const {
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (!states_[i].running) continue;
      const Stall& s = states_[i].stall;
      return {Status::kRemoteError,
              "rank " + std::to_string(tasks_[i].units[states_[i].unit].rank) +
                  " timed out after " + std::to_string(timeout.count()) +
                  " ms waiting for rank " + std::to_string(s.peer) + " (lane " +
                  std::to_string(s.lane) +
                  "): a peer did not call the matching operation, or is stuck",
              static_cast<int>(i)};
    }
    return {};
  }

 private:
  std::vector<Task>& tasks_;
  std::vector<TaskState>& states_;
  size_t active_ = 0;
  RunResult error_;
};

}  // namespace

// An in-place allreduce is the exception: it reduces into the buffer its messages name, so a
// rank waits for its reader before each such write (2 ranks, in place, 32 KiB: 7.2-7.4 us by
// reference from 4 KiB against 5.9-6.0; out of place 5.3 against 6.1-6.3).
size_t rendezvousBytes(bool rewritesWhatItSends) {
  static const int64_t set = rendezvousSetting();
  if (set >= 0) return static_cast<size_t>(set);
  return oversubscribed() || rewritesWhatItSends ? 32768 : 4096;
}

uint64_t landedSlices() { return gLandedSlices.load(std::memory_order_relaxed); }

uint64_t nextWorkStamp() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
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

struct RunScratch::States {
  std::vector<TaskState> tasks;
};
RunScratch::RunScratch() : states_(std::make_unique<States>()) {}
RunScratch::~RunScratch() = default;

RunResult run(std::vector<Task>& tasks, std::chrono::milliseconds timeout) {
  thread_local RunScratch scratch;
  return run(tasks, timeout, scratch);
}

namespace {

uint64_t holdNs() {
  static const uint64_t ns = static_cast<uint64_t>(env::getInt("WEFT_HOLD_US")) * 1000;
  return ns;
}

// Where ranks share a core, a waiting rank's yield hands the core to a rank pinned beside it:
// a context switch, about 5 us between processes under this hypervisor (4 ranks on 2 cores
// made 3.3 of them a call of a 256 B alltoall, 2.3 holding). In a small exchange that is more
// than the call's work, and it buys something only where the mate can move on and that
// helps. So a waiting rank parks on its doorbell and keeps the core, polling, while it waits
// only on ranks of other cores that are busy (they deliver without its yielding), or while no
// mate could move anyway (parked, nothing rung since). It yields at once where it waits on a
// mate, or where all it waits on are parked and a mate could move (they may wait on the
// mate). After WEFT_HOLD_US of holding it yields all the same (a missed ring, a peer waiting
// in another communicator). Ranks without mates park too: those that wait on them look.
class CoreHold {
 public:
  // `cores` is null where WEFT_HOLD_US is 0 (Communicator builds none).
  CoreHold(Doorbell* bell, const CoreSharing* cores)
      : bell_(cores ? bell : nullptr), cores_(cores) {}
  ~CoreHold() { progressed(); }
  CoreHold(const CoreHold&) = delete;
  CoreHold& operator=(const CoreHold&) = delete;

  void progressed() {
    if (parked_) bell_->unpark();
    parked_ = false;
    since_ = 0;
  }

  // After a poll of `set` (a TaskSet) that found nothing: true to poll again without yielding.
  template <class Set>
  bool hold(const Set& set) {
    // Only where such Works run does anyone look at the parking, so others do not park.
    if (!bell_ || !set.holdsCore()) return false;
    if (!parked_) {  // park, then poll once more: a ring before the park is seen by that poll
      bell_->park();
      parked_ = true;
      return true;
    }
    if (cores_->mates.empty()) return false;  // a yield gives the core to nobody: cheap
    bool onMate = false, awaitedMove = false;
    set.everyAwaitedPeer([&](int peer) {
      if (peer < 0 || static_cast<size_t>(peer) >= cores_->mate.size()) return true;
      if (cores_->mate[peer]) return !(onMate = true);
      const Doorbell* b = cores_->bells[peer];
      if (b && b->busy()) awaitedMove = true;
      return true;
    });
    if (onMate) return false;
    if (!awaitedMove)
      for (const Doorbell* mate : cores_->mates)
        if (mate->mayMove()) return false;
    const uint64_t now = nowNs();
    if (since_ == 0) {
      since_ = now;
    } else if (now - since_ > holdNs()) {
      since_ = 0;
      return false;
    }
    cpuRelax();
    cpuRelax();
    return true;
  }

 private:
  Doorbell* bell_;
  const CoreSharing* cores_;
  bool parked_ = false;
  uint64_t since_ = 0;
};

}  // namespace

RunResult run(std::vector<Task>& tasks, std::chrono::milliseconds timeout, RunScratch& scratch) {
  TaskSet set(tasks, scratch.states_->tasks);
  if (!set.start()) return set.error();
  // One rank per thread sleeps on its own doorbell; a thread driving several ranks naps briefly.
  Doorbell* bell = tasks.size() == 1 ? tasks[0].bell : nullptr;
  CoreHold core(bell, bell ? tasks[0].cores : nullptr);
  Backoff backoff;
  // The clock is read only once spinning is over: a progressing run never reads it.
  uint64_t stalledSince = 0, lastHealth = 0;
  const uint64_t timeoutNs = static_cast<uint64_t>(timeout.count()) * 1000000ull;
  uint32_t naps = 0;

  while (set.active() > 0) {
    bool progress = set.poll();
    if (set.failed()) return set.error();
    if (progress) {
      core.progressed();
      backoff.reset();
      naps = 0;
      stalledSince = 0;
      continue;
    }
    if (core.hold(set) || backoff.spin()) continue;
    // Waiting for real: check on the peers, then nap or sleep.
    if (!set.checkPoison()) return set.error();
    const uint64_t now = nowNs();
    if (stalledSince == 0) stalledSince = lastHealth = now;
    if (now - lastHealth > 100000000ull) {  // check peers every 100 ms of stalling
      lastHealth = now;
      if (!set.checkHealth()) return set.error();
    }
    if (now - stalledSince > timeoutNs) return set.timedOut(timeout);
    if (!bell) {
      napNs(++naps > 64 ? 50000 : 5000);
      continue;
    }
    // Announce, poll once more, and sleep only if that found nothing (see Doorbell).
    uint32_t seen = bell->announce();
    progress = set.poll();
    if (!progress && !set.failed()) bell->sleep(seen, 10 * 1000 * 1000);  // naps re-check aborts
    bell->retire();
    if (set.failed()) return set.error();
    if (progress) {
      core.progressed();
      backoff.reset();
      stalledSince = 0;
    }
  }
  return {};
}

}  // namespace weft::exec
