#include "algorithms/hierarchical/hierarchical.h"

#include <algorithm>
#include <map>

#include "algorithms/common/builder.h"
#include "src/common/error.h"
#include "src/plan/verifier.h"

namespace weft::algo {
namespace {

using plan::Collective;
using plan::Plan;
using plan::Program;
using plan::Ref;
using plan::Spec;
using plan::Step;
using plan::StepRef;

constexpr int kIntraUp = 0;    // lane/channel: towards the leader (reduce, gather)
constexpr int kIntraDown = 1;  // lane/channel: from the leader (broadcast, scatter)
constexpr int kInter = 2;      // first lane/channel of the leaders' rings
// The leaders run this many rings side by side, taking rounds in turn: a ring lane waits for
// each round's last message before it starts the next, so one ring alone leaves the network idle
// for a round trip per round.
constexpr int kInterRings = 2;

// Ring steps move at most one FIFO slot (every leader sends before it receives).
uint64_t ringStep(const Spec& spec, const Options& o) {
  return std::min(sliceElems(spec, o), std::max<uint64_t>(1, plan::kFifoSlotBytes / spec.elemSize));
}

StepRef add(Program& p, int lane, Step s, std::vector<StepRef> deps = {}) {
  s.deps = std::move(deps);
  return addStep(p, lane, std::move(s));
}

// One rank's view of the layout.
struct Me {
  int h, i, L, H;
  const std::vector<int>* m;  // my host's members
  int leader() const { return (*m)[0]; }
};

// Lanes of one rank: created on first use so ranks without work in a phase have no lane.
struct Lanes {
  Program& p;
  int lane[kInter + kInterRings] = {-1, -1, -1, -1};
  int get(int which) {
    int& l = lane[which];
    if (l < 0) l = addLane(p, which);
    return l;
  }
  int ring(uint64_t round) { return get(kInter + static_cast<int>(round % kInterRings)); }
};

// A piece of the data moved as one message; `len` 0 means absent.
struct Piece {
  Ref ref;
  uint64_t len = 0;
};

// Chain reduce of `src` (same offsets on every local rank) towards the leader, which writes `dst`.
StepRef chainReduce(Program& p, Lanes& lanes, const Me& me, Ref src, Ref dst, uint64_t len) {
  const auto& m = *me.m;
  int lane = lanes.get(kIntraUp);
  if (me.L == 1) return add(p, lane, copyStep(src, dst, len));
  if (me.i == me.L - 1) return add(p, lane, sendStep(m[me.i - 1], src, len));
  if (me.i > 0) return add(p, lane, recvReduceSendStep(m[me.i + 1], m[me.i - 1], src, len));
  return add(p, lane, recvReduceCopyStep(m[1], src, dst, len));
}

// Chain broadcast of `ref` from the leader to the other local ranks; `deps` gate the first step.
void chainBroadcast(Program& p, Lanes& lanes, const Me& me, Ref ref, uint64_t len,
                    std::vector<StepRef> deps) {
  if (me.L == 1) return;
  const auto& m = *me.m;
  int lane = lanes.get(kIntraDown);
  if (me.i == 0)
    add(p, lane, sendStep(m[1], ref, len), std::move(deps));
  else if (me.i < me.L - 1)
    add(p, lane, recvCopySendStep(m[me.i - 1], m[me.i + 1], ref, len), std::move(deps));
  else
    add(p, lane, recvStep(m[me.i - 1], ref, len), std::move(deps));
}

Plan allReduce(const Spec& spec, const Options& o, const HostLayout& hl) {
  Plan plan = emptyPlan(spec, "hier");
  const int H = static_cast<int>(hl.members.size());
  const uint64_t align = alignElems(spec), step = ringStep(spec, o), round = H * step;
  for (int r = 0; r < spec.nranks; ++r) {
    Program& p = plan.programs[r];
    Lanes lanes{p};
    const int h = hl.host[r];
    Me me{h, hl.local[r], static_cast<int>(hl.members[h].size()), H, &hl.members[h]};
    const int next = hl.members[mod(h + 1, H)][0], prev = hl.members[mod(h - 1, H)][0];
    for (uint64_t x = 0, k0 = 0; x < spec.count; x += round, ++k0) {
      const uint64_t len = std::min(round, spec.count - x);
      // 1. Inside the host: the leader gets the host's sum of [x, x+len) in its output.
      StepRef reduced = chainReduce(p, lanes, me, inRef(x), outRef(x), len);
      StepRef done = reduced;
      // 2. The leaders' ring allreduce of that range, in place in their outputs.
      if (me.i == 0 && H > 1) {
        const auto blk = splitEven(len, H, align);
        auto piece = [&](int b) { return Piece{outRef(x + blk[b]), blk[b + 1] - blk[b]}; };
        const int lane = lanes.ring(k0);
        std::vector<StepRef> gate = {reduced};
        for (int k = 0; k < H; ++k) {
          Piece q = piece(mod(h - k - 1, H));
          if (q.len == 0) continue;
          Step s = k == 0       ? sendStep(next, q.ref, q.len)
                   : k < H - 1 ? recvReduceSendStep(prev, next, q.ref, q.len)
                               : recvReduceCopySendStep(prev, next, q.ref, q.ref, q.len);
          done = add(p, lane, s, gate);
          gate.clear();
        }
        for (int j = 1; j < H; ++j) {
          Piece q = piece(mod(h - j, H));
          if (q.len == 0) continue;
          done = add(p, lane,
                     j < H - 1 ? recvCopySendStep(prev, next, q.ref, q.len)
                               : recvStep(prev, q.ref, q.len));
        }
      }
      // 3. Back inside the host. Non-leaders wait for their own reduce step: in place, the
      // result overwrites the input they sent.
      chainBroadcast(p, lanes, me, outRef(x), len, {me.i == 0 ? done : reduced});
    }
  }
  return plan;
}

Plan allGather(const Spec& spec, const Options& o, const HostLayout& hl) {
  Plan plan = emptyPlan(spec, "hier");
  const int H = static_cast<int>(hl.members.size()), maxL = hl.maxLocal();
  const uint64_t cnt = spec.count, step = ringStep(spec, o);
  for (int r = 0; r < spec.nranks; ++r) {
    Program& p = plan.programs[r];
    Lanes lanes{p};
    const int h = hl.host[r];
    Me me{h, hl.local[r], static_cast<int>(hl.members[h].size()), H, &hl.members[h]};
    const auto& m = hl.members[h];
    const int next = hl.members[mod(h + 1, H)][0], prev = hl.members[mod(h - 1, H)][0];
    // 1. The leader collects its host's blocks (each in its final place in the output).
    std::vector<StepRef> gathered(me.L);
    const int up = lanes.get(kIntraUp);
    if (me.i == 0) {
      gathered[0] = add(p, up, copyStep(inRef(0), outRef(r * cnt), cnt));
      for (int j = 1; j < me.L; ++j) gathered[j] = add(p, up, recvStep(m[j], outRef(m[j] * cnt), cnt));
    } else {
      gathered[0] = add(p, up, sendStep(m[0], inRef(0), cnt));
    }
    bool firstDown = true;
    // Rounds over (slice of a block, local index): host b's piece is slice x of the block of its
    // member j, absent where host b has no member j. Every rank walks the rounds in one order.
    uint64_t roundNo = 0;
    for (uint64_t x = 0; x < cnt; x += step) {
      const uint64_t len = std::min(step, cnt - x);
      for (int j = 0; j < maxL; ++j, ++roundNo) {
        auto piece = [&](int b) {
          const auto& mb = hl.members[b];
          return j < static_cast<int>(mb.size()) ? Piece{outRef(mb[j] * cnt + x), len} : Piece{};
        };
        std::vector<StepRef> ready;
        if (me.i == 0) {
          if (j < me.L) ready.push_back(gathered[j]);
          // 2. The leaders' ring allgather of this round's pieces.
          if (H > 1) {
            const int lane = lanes.ring(roundNo);
            Piece own = piece(h);
            if (own.len) ready = {add(p, lane, sendStep(next, own.ref, own.len), ready)};
            for (int k = 1; k < H; ++k) {
              Piece q = piece(mod(h - k, H));
              if (q.len == 0) continue;
              ready = {add(p, lane,
                           k < H - 1 ? recvCopySendStep(prev, next, q.ref, q.len)
                                     : recvStep(prev, q.ref, q.len),
                           ready)};
            }
          }
        } else if (firstDown) {
          ready.push_back(gathered[0]);  // in place, the block we sent comes back over itself
          firstDown = false;
        }
        // 3. Every piece of the round down the host's chain, hosts in order.
        for (int b = 0; b < H; ++b) {
          Piece q = piece(b);
          if (q.len == 0) continue;
          chainBroadcast(p, lanes, me, q.ref, q.len, ready);
          ready.clear();
        }
      }
    }
  }
  return plan;
}

Plan reduceScatter(const Spec& spec, const Options& o, const HostLayout& hl) {
  Plan plan = emptyPlan(spec, "hier");
  const int H = static_cast<int>(hl.members.size()), maxL = hl.maxLocal();
  const uint64_t cnt = spec.count, step = ringStep(spec, o);
  for (int r = 0; r < spec.nranks; ++r) {
    Program& p = plan.programs[r];
    Lanes lanes{p};
    const int h = hl.host[r];
    Me me{h, hl.local[r], static_cast<int>(hl.members[h].size()), H, &hl.members[h]};
    const auto& m = hl.members[h];
    const int next = hl.members[mod(h + 1, H)][0], prev = hl.members[mod(h - 1, H)][0];
    // Leaders reduce into scratch laid out like the input (block q at q * cnt).
    if (me.i == 0) p.scratchElems = static_cast<uint64_t>(spec.nranks) * cnt;
    uint64_t roundNo = 0;
    for (uint64_t x = 0; x < cnt; x += step) {
      const uint64_t len = std::min(step, cnt - x);
      for (int j = 0; j < maxL; ++j, ++roundNo) {
        auto rank = [&](int b) {
          const auto& mb = hl.members[b];
          return j < static_cast<int>(mb.size()) ? mb[j] : -1;
        };
        // 1. This round's pieces of every host, reduced inside this host to the leader.
        StepRef reduced{-1, -1};
        for (int b = 0; b < H; ++b) {
          if (rank(b) < 0) continue;
          const uint64_t off = rank(b) * cnt + x;
          reduced = chainReduce(p, lanes, me, inRef(off), scratchRef(off), len);
        }
        if (reduced.lane < 0) continue;
        StepRef done = reduced;
        // 2. The leaders' ring reduce-scatter: host b's piece ends, fully reduced, at leader b.
        if (me.i == 0 && H > 1) {
          const int lane = lanes.ring(roundNo);
          std::vector<StepRef> gate = {reduced};
          for (int k = 0; k < H; ++k) {
            const int b = mod(h - k - 1, H);
            if (rank(b) < 0) continue;
            const Ref s = scratchRef(rank(b) * cnt + x);
            done = add(p, lane,
                       k == 0       ? sendStep(next, s, len)
                       : k < H - 1 ? recvReduceSendStep(prev, next, s, len)
                                   : recvReduceCopyStep(prev, s, s, len),
                       gate);
            gate.clear();
          }
        }
        // 3. Member j of this host gets its piece.
        if (rank(h) < 0) continue;
        if (me.i == 0) {
          const Ref s = scratchRef(rank(h) * cnt + x);
          if (j == 0)
            add(p, lanes.get(kIntraDown), copyStep(s, outRef(x), len), {done});
          else
            add(p, lanes.get(kIntraDown), sendStep(m[j], s, len), {done});
        } else if (j == me.i) {
          // In place, the output overwrites input this rank sent in this round.
          add(p, lanes.get(kIntraDown), recvStep(m[0], outRef(x), len), {reduced});
        }
      }
    }
  }
  return plan;
}

}  // namespace

int HostLayout::maxLocal() const {
  size_t l = 0;
  for (const auto& m : members) l = std::max(l, m.size());
  return static_cast<int>(l);
}

HostLayout hostLayout(int nranks, const std::vector<int>& hostOf) {
  HostLayout hl;
  hl.host.assign(nranks, 0);
  hl.local.assign(nranks, 0);
  std::map<int, int> index;  // label -> host index, in order of the lowest rank
  for (int r = 0; r < nranks; ++r) {
    int label = static_cast<int>(hostOf.size()) == nranks ? hostOf[r] : 0;
    auto it = index.find(label);
    if (it == index.end()) {
      it = index.emplace(label, static_cast<int>(hl.members.size())).first;
      hl.members.emplace_back();
    }
    hl.host[r] = it->second;
    hl.local[r] = static_cast<int>(hl.members[it->second].size());
    hl.members[it->second].push_back(r);
  }
  return hl;
}

Plan buildHierarchical(const Spec& spec, const Options& options) {
  checkSpec(spec, options);
  Plan plan;
  if (trivialPlan(spec, "hier", &plan)) return plan;
  const HostLayout hl = hostLayout(spec.nranks, options.hostOf);
  switch (spec.coll) {
    case Collective::kAllReduce:
      return allReduce(spec, options, hl);
    case Collective::kAllGather:
      return allGather(spec, options, hl);
    case Collective::kReduceScatter:
      return reduceScatter(spec, options, hl);
    default:
      break;
  }
  throw Error(Status::kInvalidArgument,
              std::string("hier does not implement ") + plan::collectiveName(spec.coll));
}

}  // namespace weft::algo
