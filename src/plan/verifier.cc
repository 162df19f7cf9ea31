#include "src/plan/verifier.h"

#include <algorithm>
#include <deque>
#include <map>
#include <sstream>
#include <tuple>

#include "src/common/error.h"

namespace weft::plan {
namespace {

[[noreturn]] void reject(const std::string& message) {
  throw Error(Status::kInvalidArgument, "plan verifier: " + message);
}

std::string bufferText(uint16_t buffer) {
  switch (buffer) {
    case kInput:
      return "input";
    case kOutput:
      return "output";
    case kScratch:
      return "scratch";
    default:
      return "extra" + std::to_string(buffer - kExtra);
  }
}

std::string stepText(int rank, int lane, int step, const Step& s) {
  std::ostringstream out;
  out << "rank " << rank << " lane " << lane << " step " << step << " (" << opName(s.op);
  if (opRecvs(s.op)) out << " from=" << s.recvPeer;
  if (opSends(s.op)) out << " to=" << s.sendPeer;
  out << " n=" << s.count << ")";
  return out.str();
}

bool hasRoot(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

bool validOp(Op op) { return static_cast<int>(op) <= static_cast<int>(Op::kReduce); }

// Element count of a rank's buffer, or false if the buffer does not exist.
bool bufferLimit(const Plan& plan, int rank, uint16_t buffer, uint64_t* size) {
  const Program& p = plan.programs[rank];
  BufferSizes sizes = bufferSizes(plan.spec, rank);
  if (buffer == kInput)
    *size = sizes.input;
  else if (buffer == kOutput)
    *size = sizes.output;
  else if (buffer == kScratch)
    *size = p.scratchElems;
  else if (buffer - kExtra < static_cast<int>(p.extraElems.size()))
    *size = p.extraElems[buffer - kExtra];
  else
    return false;
  return true;
}

// Well-formedness that needs no simulation: shapes, peers, bounds, dependencies.
void checkStructure(const Plan& plan) {
  const Spec& spec = plan.spec;
  const int n = spec.nranks;
  if (n < 1) reject("spec.nranks is " + std::to_string(n));
  if (static_cast<int>(plan.programs.size()) != n)
    reject("plan has " + std::to_string(plan.programs.size()) + " programs for " +
           std::to_string(n) + " ranks");
  if (hasRoot(spec.coll) && (spec.root < 0 || spec.root >= n))
    reject("root " + std::to_string(spec.root) + " is not a rank");
  for (int r = 0; r < n; ++r) {
    const Program& p = plan.programs[r];
    size_t total = 0;
    std::vector<size_t> laneStart;
    for (size_t l = 0; l < p.lanes.size(); ++l) {
      laneStart.push_back(total);
      total += p.lanes[l].steps.size();
      if (p.lanes[l].channel < 0 || p.lanes[l].sendChannel < -1)
        reject("rank " + std::to_string(r) + " lane " + std::to_string(l) + " has channel " +
               std::to_string(p.lanes[l].channel) + " / send channel " +
               std::to_string(p.lanes[l].sendChannel));
    }
    // Indegrees over lane order plus explicit deps, for Kahn's cycle check below.
    std::vector<int> indeg(total, 0);
    std::vector<std::vector<size_t>> succ(total);
    for (size_t l = 0; l < p.lanes.size(); ++l) {
      const auto& steps = p.lanes[l].steps;
      for (size_t s = 0; s < steps.size(); ++s) {
        const Step& st = steps[s];
        auto here = [&] { return stepText(r, l, s, st); };
        if (!validOp(st.op)) reject(here() + ": unknown op");
        if (opSends(st.op) && (st.sendPeer < 0 || st.sendPeer >= n || st.sendPeer == r))
          reject(here() + ": bad send peer " + std::to_string(st.sendPeer));
        if (opRecvs(st.op) && (st.recvPeer < 0 || st.recvPeer >= n || st.recvPeer == r))
          reject(here() + ": bad receive peer " + std::to_string(st.recvPeer));
        auto checkRef = [&](const Ref& ref, const char* what) {
          uint64_t size = 0;
          if (!bufferLimit(plan, r, ref.buffer, &size))
            reject(here() + ": " + what + " names unknown buffer " + std::to_string(ref.buffer));
          if (ref.offset > size || st.count > size - ref.offset)
            reject(here() + ": " + what + " " + bufferText(ref.buffer) + "[" +
                   std::to_string(ref.offset) + ", " + std::to_string(ref.offset + st.count) +
                   ") is out of bounds (" + bufferText(ref.buffer) + " has " +
                   std::to_string(size) + " elements)");
        };
        if (opReadsSrc(st.op)) checkRef(st.src, "src");
        if (opWritesDst(st.op)) {
          checkRef(st.dst, "dst");
          if (st.dst.buffer == kInput && plan.outOfPlaceSafe)
            reject(here() + ": writes the input buffer (the user's send buffer is read-only)");
        }
        size_t id = laneStart[l] + s;
        if (s > 0) {
          succ[id - 1].push_back(id);
          ++indeg[id];
        }
        for (const StepRef& d : st.deps) {
          if (d.lane < 0 || d.lane >= static_cast<int>(p.lanes.size()) || d.step < 0 ||
              d.step >= static_cast<int>(p.lanes[d.lane].steps.size()))
            reject(here() + ": depends on missing step " + std::to_string(d.lane) + "." +
                   std::to_string(d.step));
          succ[laneStart[d.lane] + d.step].push_back(id);
          ++indeg[id];
        }
      }
    }
    std::vector<size_t> ready;
    for (size_t i = 0; i < total; ++i)
      if (indeg[i] == 0) ready.push_back(i);
    size_t seen = 0;
    while (!ready.empty()) {
      size_t i = ready.back();
      ready.pop_back();
      ++seen;
      for (size_t j : succ[i])
        if (--indeg[j] == 0) ready.push_back(j);
    }
    if (seen != total) {
      for (size_t l = 0; l < p.lanes.size(); ++l)
        for (size_t s = 0; s < p.lanes[l].steps.size(); ++s)
          if (indeg[laneStart[l] + s] > 0)
            reject(stepText(r, l, s, p.lanes[l].steps[s]) + ": dependency cycle");
    }
  }
}

// The values of a run of elements: each holds the sum of some ranks' copies of one element index
// (a bitset of ranks, `words` 64-bit words per element).
struct Values {
  std::vector<uint64_t> idx;
  std::vector<uint64_t> mask;
};

// Vector clocks over all lanes of all ranks. Step k of a lane has the events start, access
// (first data received, or sending begins), one per slice it moves, and end, in this order.
using Clock = uint64_t;
constexpr Clock kStepStride = Clock{1} << 32;
constexpr Clock stepStamp(uint64_t k, uint64_t event) { return k * kStepStride + event; }
constexpr Clock startStamp(uint64_t k) { return stepStamp(k, 1); }
constexpr Clock accessStamp(uint64_t k) { return stepStamp(k, 2); }
constexpr Clock sliceStamp(uint64_t k, uint64_t j) {
  return stepStamp(k, 3 + std::min<uint64_t>(j, kStepStride - 5));
}
constexpr Clock endStamp(uint64_t k) { return stepStamp(k, kStepStride - 1); }

struct Slice {
  int32_t sender = -1;  // global step id
  uint64_t msgCount = 0;
  Values values;
  std::vector<Clock> vc;  // the sender's clock as it sent this slice
};

// An access to an element by a step, finished once an observer's clock for the step's lane
// reaches `done` (the step's end; a slice's stamp for what a slice of a message moves).
struct Access {
  int32_t step = -1;
  Clock done = 0;
};

struct Fifo {
  int from = 0, to = 0, channel = 0;
  std::deque<Slice> q;
  int32_t lastSender = -1;
  int32_t lastReceiver = -1;
};

// One rank's memory: every buffer of the rank mapped into one array of elements, so aliasing
// buffers share elements.
struct Arena {
  // kOrigCopied: original input that a skipped in-place copy made readable through any buffer.
  enum : uint8_t { kUninit = 0, kOrig = 1, kValue = 2, kOrigCopied = 3 };
  std::vector<uint8_t> state;
  std::vector<uint64_t> idx;
  std::vector<uint64_t> mask;
  std::vector<Access> writer;                // last write
  std::vector<std::vector<Access>> readers;  // reads since, one per lane
  std::vector<uint64_t> base;                 // per buffer id
};

struct LaneRun {
  int rank = 0, lane = 0;
  size_t step = 0;
  bool started = false;
  uint64_t slice = 0, nslices = 0;
  int32_t msgSender = -1;
  std::vector<Clock> vc;  // see Clock
};

class Simulator {
 public:
  Simulator(const Plan& plan, const VerifyOptions& opt, bool inPlace)
      : plan_(plan), n_(plan.spec.nranks), inPlace_(inPlace),
        inPlaceOnly_(inPlace && !plan.outOfPlaceSafe) {
    words_ = (n_ + 63) / 64;
    uint64_t es = std::max<uint32_t>(1, plan.spec.elemSize);
    slice_ = opt.sliceElems ? opt.sliceElems : std::max<uint64_t>(1, kFifoSlotBytes / es);
    slots_ = std::max(1, opt.fifoSlots);
    reduction_ = plan.spec.coll == Collective::kAllReduce ||
                 plan.spec.coll == Collective::kReduce ||
                 plan.spec.coll == Collective::kReduceScatter;
    setupSteps();
    setupArenas();
  }

  void run() {
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

 private:
  std::string mode() const { return inPlace_ ? "(in-place) " : ""; }

  std::string describe(int32_t gid) const {
    const LaneRun& L = lanes_[gLane_[gid]];
    return stepText(L.rank, L.lane, gIndex_[gid],
                    plan_.programs[L.rank].lanes[L.lane].steps[gIndex_[gid]]);
  }

  void setupSteps() {
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
          sendFifo_.push_back(opSends(st.op) ? fifoId(r, st.sendPeer, sendChannelOf(p.lanes[l])) : -1);
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

  int32_t gid(int rank, int lane, int step) const {
    return gidBase_[laneBase_[rank] + lane] + step;
  }

  void setupArenas() {
    const Spec& spec = plan_.spec;
    arenas_.resize(n_);
    for (int r = 0; r < n_; ++r) {
      const Program& p = plan_.programs[r];
      BufferSizes sz = bufferSizes(spec, r);
      Arena& a = arenas_[r];
      a.base.assign(kExtra + p.extraElems.size(), 0);
      uint64_t c = spec.count, end = 0;
      bool aliased = false;
      if (inPlace_) {
        aliased = true;
        switch (spec.coll) {
          case Collective::kAllGather:
            a.base[kInput] = r * c;
            break;
          case Collective::kReduceScatter:
            a.base[kOutput] = r * c;
            break;
          case Collective::kGather:
            if (r == spec.root)
              a.base[kInput] = r * c;
            else
              aliased = false;
            break;
          case Collective::kScatter:
            if (r == spec.root)
              a.base[kOutput] = r * c;
            else
              aliased = false;
            break;
          case Collective::kSendRecv:
            aliased = false;
            break;
          default:
            break;  // same pointer
        }
      }
      if (aliased) {
        end = std::max(a.base[kInput] + sz.input, a.base[kOutput] + sz.output);
      } else {
        a.base[kInput] = 0;
        a.base[kOutput] = sz.input;
        end = sz.input + sz.output;
      }
      a.base[kScratch] = end;
      end += p.scratchElems;
      for (size_t x = 0; x < p.extraElems.size(); ++x) {
        a.base[kExtra + x] = end;
        end += p.extraElems[x];
      }
      a.state.assign(end, Arena::kUninit);
      a.idx.assign(end, 0);
      a.mask.assign(end * words_, 0);
      a.writer.assign(end, Access{});
      a.readers.resize(end);
      auto initial = [&](uint64_t e, uint64_t index, uint8_t state) {
        a.state[e] = state;
        a.idx[e] = index;
        a.mask[e * words_ + r / 64] |= uint64_t{1} << (r % 64);
      };
      for (uint64_t i = 0; i < sz.input; ++i) initial(a.base[kInput] + i, i, Arena::kOrig);
      for (size_t x = 0; x < p.extraElems.size(); ++x)
        for (uint64_t i = 0; i < p.extraElems[x]; ++i)
          initial(a.base[kExtra + x] + i, i, Arena::kValue);
    }
  }

  static void join(std::vector<Clock>& into, const std::vector<Clock>& from) {
    for (size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], from[i]);
  }

  // Whether step `prev` has ended before lane g's current point (happens-before).
  bool ordered(size_t g, int32_t prev) const {
    return prev < 0 || ordered(g, Access{prev, endStamp(gIndex_[prev])});
  }
  // Whether an access has finished before lane g's current point.
  bool ordered(size_t g, const Access& x) const {
    if (x.step < 0) return true;
    size_t pl = gLane_[x.step];
    return pl == g || lanes_[g].vc[pl] >= x.done;
  }

  void access(size_t g, int32_t me, const Ref& ref, uint64_t i, bool write) {
    Arena& a = arenas_[lanes_[g].rank];
    uint64_t e = a.base[ref.buffer] + ref.offset + i;
    auto race = [&](int32_t other, const char* what) {
      reject(mode() + describe(me) + (write ? " writes " : " reads ") + bufferText(ref.buffer) +
             "[" + std::to_string(ref.offset + i) + "] while " + describe(other) + " may still " +
             what + " it: no dependency orders the two lanes");
    };
    if (!ordered(g, a.writer[e])) race(a.writer[e].step, "write");
    auto& rd = a.readers[e];
    const Access mine{me, accessDone_};
    if (write) {
      for (const Access& o : rd)
        if (!ordered(g, o)) race(o.step, "read");
      rd.clear();
      a.writer[e] = mine;
    } else {
      for (Access& o : rd)
        if (gLane_[o.step] == g) {
          o = mine;
          return;
        }
      rd.push_back(mine);
    }
  }

  Values read(size_t g, int32_t me, const Ref& ref, uint64_t off, uint64_t count) {
    Arena& a = arenas_[lanes_[g].rank];
    Values v;
    v.idx.resize(count);
    v.mask.resize(count * words_);
    for (uint64_t i = 0; i < count; ++i) {
      access(g, me, ref, off + i, false);
      uint64_t e = a.base[ref.buffer] + ref.offset + off + i;
      auto at = [&] {
        return bufferText(ref.buffer) + "[" + std::to_string(ref.offset + off + i) + "]";
      };
      if (inPlaceOnly_) {
        // Input and output are one buffer: any element holding data may be read through either.
        if (a.state[e] == Arena::kUninit)
          reject(mode() + describe(me) + " reads " + at() + ", which holds no value yet");
      } else if (ref.buffer == kInput) {
        if (a.state[e] != Arena::kOrig && a.state[e] != Arena::kOrigCopied)
          reject(mode() + describe(me) + " reads " + at() +
                 " after it was overwritten (input and output alias in place)");
      } else if (a.state[e] == Arena::kUninit) {
        reject(mode() + describe(me) + " reads " + at() + ", which holds no value yet");
      } else if (a.state[e] == Arena::kOrig) {
        reject(mode() + describe(me) + " reads " + at() +
               ", which still holds the original input: read it through the input buffer");
      }
      v.idx[i] = a.idx[e];
      std::copy_n(&a.mask[e * words_], words_, &v.mask[i * words_]);
    }
    return v;
  }

  void write(size_t g, int32_t me, const Ref& ref, uint64_t off, const Values& v) {
    Arena& a = arenas_[lanes_[g].rank];
    for (uint64_t i = 0; i < v.idx.size(); ++i) {
      access(g, me, ref, off + i, true);
      uint64_t e = a.base[ref.buffer] + ref.offset + off + i;
      a.state[e] = Arena::kValue;
      a.idx[e] = v.idx[i];
      std::copy_n(&v.mask[i * words_], words_, &a.mask[e * words_]);
    }
  }

  void reduce(int32_t me, Values& acc, const Values& other) {
    for (size_t i = 0; i < acc.idx.size(); ++i) {
      if (acc.idx[i] != other.idx[i])
        reject(mode() + describe(me) + " combines copies of element " + std::to_string(acc.idx[i]) +
               " and element " + std::to_string(other.idx[i]) + " (slice element " +
               std::to_string(i) + ")");
      for (int w = 0; w < words_; ++w) {
        uint64_t both = acc.mask[i * words_ + w] & other.mask[i * words_ + w];
        if (both)
          reject(mode() + describe(me) + " counts rank " +
                 std::to_string(w * 64 + __builtin_ctzll(both)) + "'s contribution to element " +
                 std::to_string(acc.idx[i]) + " twice");
        acc.mask[i * words_ + w] |= other.mask[i * words_ + w];
      }
    }
  }

  bool sameElements(size_t g, const Ref& a, const Ref& b) const {
    const Arena& ar = arenas_[lanes_[g].rank];
    return ar.base[a.buffer] + a.offset == ar.base[b.buffer] + b.offset;
  }

  // The executor skips a copy onto itself unless it scales (PreMulSum, only for reductions, which
  // then really rewrite the memory): the elements keep their data and become readable through
  // the destination buffer too.
  void copyInPlace(size_t g, int32_t me, const Step& st) {
    Arena& a = arenas_[lanes_[g].rank];
    read(g, me, st.src, 0, st.count);
    for (uint64_t i = 0; i < st.count; ++i) {
      uint64_t e = a.base[st.dst.buffer] + st.dst.offset + i;
      if (a.state[e] == Arena::kOrig) a.state[e] = Arena::kOrigCopied;
    }
  }

  // src and dst of one step may be the same elements, never partly overlapping ones.
  void checkOverlap(size_t g, int32_t me, const Step& st) {
    if (!opReadsSrc(st.op) || !opWritesDst(st.op) || st.count == 0) return;
    const Arena& a = arenas_[lanes_[g].rank];
    uint64_t s = a.base[st.src.buffer] + st.src.offset, d = a.base[st.dst.buffer] + st.dst.offset;
    if (s != d && s < d + st.count && d < s + st.count)
      reject(mode() + describe(me) + ": src and dst overlap without being the same elements");
  }

  void complete(size_t g, int32_t me) {
    LaneRun& L = lanes_[g];
    L.vc[g] = endStamp(L.step);
    if (needEnd_[me]) vcEnd_[me] = L.vc;
    completed_[me] = 1;
    ++L.step;
    L.started = false;
  }

  // Runs lane g one event further; false if it is done or blocked.
  bool advance(size_t g) {
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

  void reportDeadlock() {
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

  std::string maskText(const uint64_t* mask) const {
    std::string s = "{";
    int shown = 0;
    for (int r = 0; r < n_; ++r)
      if (mask[r / 64] >> (r % 64) & 1) s += (shown++ ? "," : "") + std::to_string(r);
    return s + "}";
  }

  void checkPostcondition() {
    const Spec& spec = plan_.spec;
    if (spec.coll == Collective::kSendRecv) return;
    const uint64_t c = spec.count;
    std::vector<uint64_t> want(words_);
    for (int r = 0; r < n_; ++r) {
      if ((spec.coll == Collective::kReduce || spec.coll == Collective::kGather) && r != spec.root)
        continue;
      const Arena& a = arenas_[r];
      const uint64_t outSize = bufferSizes(spec, r).output;
      for (uint64_t i = 0; i < outSize; ++i) {
        uint64_t idx = i;
        int single = -1;  // -1: every rank contributes
        switch (spec.coll) {
          case Collective::kAllReduce:
          case Collective::kReduce:
            break;
          case Collective::kReduceScatter:
            idx = r * c + i;
            break;
          case Collective::kAllGather:
          case Collective::kGather:
            single = i / c;
            idx = i % c;
            break;
          case Collective::kBroadcast:
            single = spec.root;
            break;
          case Collective::kAlltoAll:
            single = i / c;
            idx = r * c + i % c;
            break;
          case Collective::kScatter:
            single = spec.root;
            idx = r * c + i;
            break;
          case Collective::kSendRecv:
            break;
        }
        std::fill(want.begin(), want.end(), 0);
        for (int s = 0; s < n_; ++s)
          if (single < 0 || s == single) want[s / 64] |= uint64_t{1} << (s % 64);
        const uint64_t e = a.base[kOutput] + i;
        std::string at = mode() + "postcondition of " + collectiveName(spec.coll) + ": rank " +
                         std::to_string(r) + " output[" + std::to_string(i) + "]";
        // An in-place-only plan may leave a rank's own input where it already is (allgather).
        const bool holds = a.state[e] == Arena::kValue || a.state[e] == Arena::kOrigCopied ||
                           (inPlaceOnly_ && a.state[e] == Arena::kOrig);
        if (!holds) reject(at + " is never written");
        if (a.idx[e] != idx || !std::equal(want.begin(), want.end(), &a.mask[e * words_]))
          reject(at + " holds ranks " + maskText(&a.mask[e * words_]) + " of element " +
                 std::to_string(a.idx[e]) + ", expected ranks " + maskText(want.data()) +
                 " of element " + std::to_string(idx));
      }
    }
  }

  const Plan& plan_;
  const int n_;
  const bool inPlace_;
  const bool inPlaceOnly_;  // plan.outOfPlaceSafe is false: Input is the output buffer too
  int words_ = 1;
  uint64_t slice_ = 1;
  int slots_ = 2;
  bool reduction_ = false;        // PreMulSum may apply: copies onto themselves rewrite memory
  std::vector<LaneRun> lanes_;    // global lanes, rank-major
  std::vector<size_t> laneBase_;  // first global lane of each rank
  std::vector<int32_t> gidBase_;  // first global step id of each global lane
  std::vector<uint32_t> gLane_;   // global step id -> global lane
  std::vector<uint32_t> gIndex_;  // global step id -> step index in its lane
  std::vector<int32_t> sendFifo_, recvFifo_;
  std::vector<char> completed_, needEnd_;
  std::vector<std::vector<Clock>> vcEnd_;
  Clock accessDone_ = 0;  // when the accesses being recorded finish (see Access)
  std::vector<Fifo> fifos_;
  std::vector<Arena> arenas_;
};

}  // namespace

void verify(const Plan& plan, const VerifyOptions& options) {
  if (!plan.outOfPlaceSafe && (!plan.inPlaceSafe || plan.spec.coll == Collective::kSendRecv))
    reject("plan is safe neither in place nor out of place");
  checkStructure(plan);
  if (plan.outOfPlaceSafe) Simulator(plan, options, false).run();
  if (plan.inPlaceSafe && plan.spec.coll != Collective::kSendRecv)
    Simulator(plan, options, true).run();
}

std::string verifyMessage(const Plan& plan, const VerifyOptions& options) {
  try {
    verify(plan, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace weft::plan
