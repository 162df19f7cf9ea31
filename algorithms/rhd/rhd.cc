#include "algorithms/rhd/rhd.h"

#include <utility>
#include <vector>

#include "algorithms/common/builder.h"

namespace weft::algo {
namespace {

// Maps real ranks onto the p "virtual" ranks that run the power-of-two exchange.
struct Fold {
  explicit Fold(int n) : n(n) {
    p = 1;
    while (p * 2 <= n) p *= 2;
    extra = n - p;
  }
  bool foldedOut(int r) const { return r < 2 * extra && r % 2 == 0; }
  bool foldedIn(int r) const { return r < 2 * extra && r % 2 == 1; }
  int virt(int r) const { return r < 2 * extra ? r / 2 : r - extra; }
  int real(int v) const { return v < extra ? 2 * v + 1 : v + extra; }
  // First real rank whose data virtual rank v carries (v == p gives n).
  int firstReal(int v) const { return v < extra ? 2 * v : v + extra; }
  int n, p, extra;

  // Recursive halving from the virtual ranks [0, p) down to virtual rank v's own block: per
  // round, round(peer, kept blocks [klo, khi), sent blocks [slo, shi), whether it is the last).
  template <class Round>
  void halve(int v, Round&& round) const {
    int lo = 0, hi = p;
    for (int m = p / 2; m >= 1; m /= 2) {
      const int mid = (lo + hi) / 2;
      const int klo = (v & m) ? mid : lo, khi = (v & m) ? hi : mid;
      const int slo = (v & m) ? lo : mid, shi = (v & m) ? mid : hi;
      round(real(v ^ m), klo, khi, slo, shi, m == 1);
      lo = klo;
      hi = khi;
    }
  }
  // Recursive doubling from virtual rank v's own block up to all p: per round, round(peer, first
  // block held [mine, mine + m), first block the peer holds [theirs, theirs + m), m).
  template <class Round>
  void doubleUp(int v, Round&& round) const {
    for (int m = 1; m < p; m *= 2) round(real(v ^ m), v & ~(m - 1), (v ^ m) & ~(m - 1), m);
  }
};

// The two lanes every rank uses per channel part: sends never wait for the same round's receive,
// so pairs exchanging large messages cannot deadlock.
struct Lanes {
  Lanes(Program& p, int channel) : p(p), send(addLane(p, channel)), recv(addLane(p, channel)) {}
  Program& p;
  int send, recv;
  StepRef last{-1, -1};  // latest receive-lane step, which produced the data sent next
  void sendAfterLast(Step s) {
    if (last.lane >= 0) s.deps.push_back(last);
    addStep(p, send, std::move(s));
  }
  void receive(Step s) { last = addStep(p, recv, std::move(s)); }
};

// Every rank, per channel part on its two lanes: steps(lanes, rank, part).
template <class Steps>
Plan rhdPlan(const Spec& spec, const Options& o, Steps&& steps) {
  const auto parts = channelParts(spec, o);
  return eachRank(spec, "rhd", [&](Program& p, int r) {
    for (const ChannelPart& part : parts) {
      Lanes lanes(p, part.channel);
      steps(lanes, r, part);
    }
  });
}

Plan allReduce(const Spec& spec, const Options& o) {
  const Fold f(spec.nranks);
  const uint64_t align = alignElems(spec);
  return rhdPlan(spec, o, [&](Lanes& lanes, int r, const ChannelPart& part) {
    const uint64_t q0 = part.begin, len = part.len();
    if (f.foldedOut(r)) {
      lanes.sendAfterLast(sendStep(r + 1, inRef(q0), len));
      lanes.receive(recvStep(r + 1, outRef(q0), len));
      return;
    }
    const auto blk = splitEven(len, f.p, align);
    auto at = [&](int b) { return q0 + blk[b]; };
    auto span = [&](int b0, int b1) { return blk[b1] - blk[b0]; };
    const int v = f.virt(r);
    bool partial = false;  // whether the running sums live in the output (else: input)
    if (f.foldedIn(r)) {
      lanes.receive(recvReduceCopyStep(r - 1, inRef(q0), outRef(q0), len));
      partial = true;
    }
    auto cur = [&](uint64_t off) { return partial ? outRef(off) : inRef(off); };
    f.halve(v, [&](int peer, int klo, int khi, int slo, int shi, bool) {
      lanes.sendAfterLast(sendStep(peer, cur(at(slo)), span(slo, shi)));
      lanes.receive(recvReduceCopyStep(peer, cur(at(klo)), outRef(at(klo)), span(klo, khi)));
      partial = true;
    });
    f.doubleUp(v, [&](int peer, int mine, int theirs, int m) {
      lanes.sendAfterLast(sendStep(peer, outRef(at(mine)), span(mine, mine + m)));
      lanes.receive(recvStep(peer, outRef(at(theirs)), span(theirs, theirs + m)));
    });
    if (f.foldedIn(r)) lanes.sendAfterLast(sendStep(r - 1, outRef(q0), len));
  });
}

// Contiguous element ranges of the blocks of real ranks [s0, s1) restricted to one channel part
// [q0, q1) of each block; `perRank` splits them at block boundaries even when contiguous.
struct Piece {
  int rank;  // first rank of the piece
  uint64_t off, count;
};
std::vector<Piece> pieces(int s0, int s1, uint64_t cnt, uint64_t q0, uint64_t q1, bool perRank) {
  std::vector<Piece> out;
  if (s1 <= s0) return out;
  if (!perRank && q0 == 0 && q1 == cnt) {
    out.push_back({s0, s0 * cnt, (s1 - s0) * cnt});
  } else {
    for (int s = s0; s < s1; ++s) out.push_back({s, s * cnt + q0, q1 - q0});
  }
  return out;
}

Plan allGather(const Spec& spec, const Options& o) {
  const Fold f(spec.nranks);
  const uint64_t cnt = spec.count;
  return rhdPlan(spec, o, [&](Lanes& lanes, int r, const ChannelPart& part) {
    const uint64_t q0 = part.begin, len = part.len();
    auto blocks = [&](int s0, int s1) { return pieces(s0, s1, cnt, q0, part.end, false); };
    lanes.receive(copyStep(inRef(q0), outRef(r * cnt + q0), len));
    if (f.foldedOut(r)) {
      lanes.sendAfterLast(sendStep(r + 1, inRef(q0), len));
      for (int s : {0, 1}) {
        for (const Piece& x : s ? blocks(r + 1, f.n) : blocks(0, r))
          lanes.receive(recvStep(r + 1, outRef(x.off), x.count));
      }
      return;
    }
    const int v = f.virt(r);
    if (f.foldedIn(r)) lanes.receive(recvStep(r - 1, outRef((r - 1) * cnt + q0), len));
    f.doubleUp(v, [&](int peer, int mine, int theirs, int m) {
      for (const Piece& x : blocks(f.firstReal(mine), f.firstReal(mine + m)))
        lanes.sendAfterLast(sendStep(peer, outRef(x.off), x.count));
      for (const Piece& x : blocks(f.firstReal(theirs), f.firstReal(theirs + m)))
        lanes.receive(recvStep(peer, outRef(x.off), x.count));
    });
    if (f.foldedIn(r)) {
      for (int s : {0, 1}) {
        for (const Piece& x : s ? blocks(r, f.n) : blocks(0, r - 1))
          lanes.sendAfterLast(sendStep(r - 1, outRef(x.off), x.count));
      }
    }
  });
}

// Running sums live in scratch laid out like the input (n * count elements); the final block of
// each rank lands in its output.
Plan reduceScatter(const Spec& spec, const Options& o) {
  const Fold f(spec.nranks);
  const uint64_t cnt = spec.count;
  return rhdPlan(spec, o, [&](Lanes& lanes, int r, const ChannelPart& part) {
    const uint64_t q0 = part.begin, len = part.len();
    auto blocks = [&](int s0, int s1, bool perRank) {
      return pieces(s0, s1, cnt, q0, part.end, perRank);
    };
    if (f.foldedOut(r)) {
      for (const Piece& x : blocks(0, f.n, false))
        lanes.sendAfterLast(sendStep(r + 1, inRef(x.off), x.count));
      lanes.receive(recvStep(r + 1, outRef(q0), len));
      return;
    }
    lanes.p.scratchElems = f.n * cnt;
    const int v = f.virt(r);
    bool partial = false;  // whether the running sums live in scratch (else: input)
    if (f.foldedIn(r)) {
      for (const Piece& x : blocks(0, f.n, false))
        lanes.receive(recvReduceCopyStep(r - 1, inRef(x.off), scratchRef(x.off), x.count));
      partial = true;
    }
    auto cur = [&](uint64_t off) { return partial ? scratchRef(off) : inRef(off); };
    f.halve(v, [&](int peer, int klo, int khi, int slo, int shi, bool last) {
      // The last round's kept blocks are final: split them per rank.
      for (const Piece& x : blocks(f.firstReal(slo), f.firstReal(shi), last))
        lanes.sendAfterLast(sendStep(peer, cur(x.off), x.count));
      for (const Piece& x : blocks(f.firstReal(klo), f.firstReal(khi), last)) {
        Ref dst = last && x.rank == r ? outRef(q0) : scratchRef(x.off);
        lanes.receive(recvReduceCopyStep(peer, cur(x.off), dst, x.count));
      }
      partial = true;
    });
    if (f.foldedIn(r)) lanes.sendAfterLast(sendStep(r - 1, scratchRef((r - 1) * cnt + q0), len));
  });
}

}  // namespace

Plan buildRhd(const Spec& spec, const Options& options) {
  return buildCollective("rhd", spec, options,
                         {{Collective::kAllReduce, allReduce},
                          {Collective::kAllGather, allGather},
                          {Collective::kReduceScatter, reduceScatter}});
}

}  // namespace weft::algo
