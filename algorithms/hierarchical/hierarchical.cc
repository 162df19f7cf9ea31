#include "algorithms/hierarchical/hierarchical.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "algorithms/common/builder.h"

namespace weft::algo {
namespace {

constexpr int kIntraUp = 0;    // lane/channel: towards the leader (reduce, gather)
constexpr int kIntraDown = 1;  // lane/channel: from the leader (broadcast, scatter)
constexpr int kInter = 2;      // first lane/channel of the leaders' rings
// The leaders run this many rings side by side, taking rounds in turn: a ring lane waits for
// each round's last message before it starts the next, so one ring alone leaves the network idle
// for a round trip per round.
constexpr int kInterRings = 2;

StepRef add(Program& p, int lane, Step s, std::vector<StepRef> deps = {}) {
  s.deps = std::move(deps);
  return addStep(p, lane, std::move(s));
}

// One rank's view of the layout.
struct Me {
  Me(const HostLayout& hl, int r)
      : hl(hl),
        rank(r),
        h(hl.host[r]),
        i(hl.local[r]),
        L(static_cast<int>(hl.members[h].size())),
        H(static_cast<int>(hl.members.size())),
        m(hl.members[h]),
        next(hl.members[mod(h + 1, H)][0]),
        prev(hl.members[mod(h - 1, H)][0]) {}
  const HostLayout& hl;
  int rank;
  int h, i, L, H;             // my host, my index in it, its size, the number of hosts
  const std::vector<int>& m;  // my host's members
  int next, prev;             // the leaders of the next and the previous host
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
  const auto& m = me.m;
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
  const auto& m = me.m;
  int lane = lanes.get(kIntraDown);
  if (me.i == 0)
    add(p, lane, sendStep(m[1], ref, len), std::move(deps));
  else if (me.i < me.L - 1)
    add(p, lane, recvCopySendStep(m[me.i - 1], m[me.i + 1], ref, len), std::move(deps));
  else
    add(p, lane, recvStep(m[me.i - 1], ref, len), std::move(deps));
}

// Every rank with its lanes and its view of the layout: steps(program, lanes, me).
template <class Steps>
Plan hierPlan(const Spec& spec, const Options& o, Steps&& steps) {
  const HostLayout hl = hostLayout(spec.nranks, o.hostOf);
  return eachRank(spec, "hier", [&](Program& p, int r) {
    Lanes lanes{p};
    steps(p, lanes, Me(hl, r));
  });
}

// The rounds of allgather and reduce-scatter, in one order on every rank: (slice [x, x + len) of
// a block, local index j), numbered from 0.
template <class Round>
void forEachRound(const Me& me, uint64_t cnt, uint64_t step, Round&& round) {
  const int maxL = me.hl.maxLocal();
  uint64_t roundNo = 0;
  forEachSlice(0, cnt, step, [&](uint64_t x, uint64_t len) {
    for (int j = 0; j < maxL; ++j) round(x, len, j, roundNo++);
  });
}

Plan allReduce(const Spec& spec, const Options& o) {
  const uint64_t align = alignElems(spec), step = ringChunk(spec, o);
  return hierPlan(spec, o, [&](Program& p, Lanes& lanes, const Me& me) {
    const int H = me.H, h = me.h;
    uint64_t k0 = 0;
    forEachSlice(0, spec.count, H * step, [&](uint64_t x, uint64_t len) {
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
          Step s = k == 0      ? sendStep(me.next, q.ref, q.len)
                   : k < H - 1 ? recvReduceSendStep(me.prev, me.next, q.ref, q.len)
                               : recvReduceCopySendStep(me.prev, me.next, q.ref, q.ref, q.len);
          done = add(p, lane, s, gate);
          gate.clear();
        }
        for (int j = 1; j < H; ++j) {
          Piece q = piece(mod(h - j, H));
          if (q.len == 0) continue;
          done = add(p, lane,
                     j < H - 1 ? recvCopySendStep(me.prev, me.next, q.ref, q.len)
                               : recvStep(me.prev, q.ref, q.len));
        }
      }
      // 3. Back inside the host. Non-leaders wait for their own reduce step: in place, the
      // result overwrites the input they sent.
      chainBroadcast(p, lanes, me, outRef(x), len, {me.i == 0 ? done : reduced});
      ++k0;
    });
  });
}

Plan allGather(const Spec& spec, const Options& o) {
  const uint64_t cnt = spec.count, step = ringChunk(spec, o);
  return hierPlan(spec, o, [&](Program& p, Lanes& lanes, const Me& me) {
    const int H = me.H, h = me.h, r = me.rank;
    const auto& m = me.m;
    // 1. The leader collects its host's blocks (each in its final place in the output).
    std::vector<StepRef> gathered(me.L);
    const int up = lanes.get(kIntraUp);
    if (me.i == 0) {
      gathered[0] = add(p, up, copyStep(inRef(0), outRef(r * cnt), cnt));
      for (int j = 1; j < me.L; ++j)
        gathered[j] = add(p, up, recvStep(m[j], outRef(m[j] * cnt), cnt));
    } else {
      gathered[0] = add(p, up, sendStep(m[0], inRef(0), cnt));
    }
    bool firstDown = true;
    // Host b's piece of a round is slice x of the block of its member j, absent where host b has
    // no member j.
    forEachRound(me, cnt, step, [&](uint64_t x, uint64_t len, int j, uint64_t roundNo) {
      auto piece = [&](int b) {
        const auto& mb = me.hl.members[b];
        return j < static_cast<int>(mb.size()) ? Piece{outRef(mb[j] * cnt + x), len} : Piece{};
      };
      std::vector<StepRef> ready;
      if (me.i == 0) {
        if (j < me.L) ready.push_back(gathered[j]);
        // 2. The leaders' ring allgather of this round's pieces.
        if (H > 1) {
          const int lane = lanes.ring(roundNo);
          Piece own = piece(h);
          if (own.len) ready = {add(p, lane, sendStep(me.next, own.ref, own.len), ready)};
          for (int k = 1; k < H; ++k) {
            Piece q = piece(mod(h - k, H));
            if (q.len == 0) continue;
            ready = {add(p, lane,
                         k < H - 1 ? recvCopySendStep(me.prev, me.next, q.ref, q.len)
                                   : recvStep(me.prev, q.ref, q.len),
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
    });
  });
}

Plan reduceScatter(const Spec& spec, const Options& o) {
  const uint64_t cnt = spec.count, step = ringChunk(spec, o);
  return hierPlan(spec, o, [&](Program& p, Lanes& lanes, const Me& me) {
    const int H = me.H, h = me.h;
    const auto& m = me.m;
    // Leaders reduce into scratch laid out like the input (block q at q * cnt).
    if (me.i == 0) p.scratchElems = static_cast<uint64_t>(spec.nranks) * cnt;
    forEachRound(me, cnt, step, [&](uint64_t x, uint64_t len, int j, uint64_t roundNo) {
      auto rank = [&](int b) {
        const auto& mb = me.hl.members[b];
        return j < static_cast<int>(mb.size()) ? mb[j] : -1;
      };
      // 1. This round's pieces of every host, reduced inside this host to the leader.
      StepRef reduced{-1, -1};
      for (int b = 0; b < H; ++b) {
        if (rank(b) < 0) continue;
        const uint64_t off = rank(b) * cnt + x;
        reduced = chainReduce(p, lanes, me, inRef(off), scratchRef(off), len);
      }
      if (reduced.lane < 0) return;
      StepRef done = reduced;
      // 2. The leaders' ring reduce-scatter: host b's piece ends, fully reduced, at
      // leader b.
      if (me.i == 0 && H > 1) {
        const int lane = lanes.ring(roundNo);
        std::vector<StepRef> gate = {reduced};
        for (int k = 0; k < H; ++k) {
          const int b = mod(h - k - 1, H);
          if (rank(b) < 0) continue;
          const Ref s = scratchRef(rank(b) * cnt + x);
          done = add(p, lane,
                     k == 0      ? sendStep(me.next, s, len)
                     : k < H - 1 ? recvReduceSendStep(me.prev, me.next, s, len)
                                 : recvReduceCopyStep(me.prev, s, s, len),
                     gate);
          gate.clear();
        }
      }
      // 3. Member j of this host gets its piece.
      if (rank(h) < 0) return;
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
    });
  });
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
  return buildCollective("hier", spec, options,
                         {{Collective::kAllReduce, allReduce},
                          {Collective::kAllGather, allGather},
                          {Collective::kReduceScatter, reduceScatter}});
}

}  // namespace weft::algo
