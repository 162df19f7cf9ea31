#include "algorithms/rhd/rhd.h"

#include <string>
#include <vector>

#include "algorithms/common/builder.h"
#include "src/common/error.h"

namespace weft::algo {
namespace {

using plan::Collective;
using plan::Plan;
using plan::Program;
using plan::Ref;
using plan::Spec;
using plan::Step;
using plan::StepRef;

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
};

// The two lanes every rank uses per channel part: sends never wait for the same round's receive,
// so pairs exchanging large messages cannot deadlock.
struct Lanes {
  int send, recv;
  StepRef last{-1, -1};  // latest receive-lane step, which produced the data sent next
  void sendAfterLast(Program& p, Step s) {
    if (last.lane >= 0) s.deps.push_back(last);
    addStep(p, send, std::move(s));
  }
  void recv_(Program& p, Step s) { last = addStep(p, recv, std::move(s)); }
};

Plan allReduce(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "rhd");
  const Fold f(spec.nranks);
  const uint64_t align = alignElems(spec);
  const auto parts = splitEven(spec.count, o.channels, align);
  for (int r = 0; r < f.n; ++r) {
    Program& p = plan.programs[r];
    for (int c = 0; c < o.channels; ++c) {
      const uint64_t q0 = parts[c], len = parts[c + 1] - parts[c];
      if (len == 0) continue;
      Lanes L{addLane(p, c), addLane(p, c)};
      if (f.foldedOut(r)) {
        L.sendAfterLast(p, sendStep(r + 1, inRef(q0), len));
        L.recv_(p, recvStep(r + 1, outRef(q0), len));
        continue;
      }
      const auto blk = splitEven(len, f.p, align);
      auto at = [&](int b) { return q0 + blk[b]; };
      auto span = [&](int b0, int b1) { return blk[b1] - blk[b0]; };
      const int v = f.virt(r);
      bool partial = false;  // whether the running sums live in the output (else: input)
      if (f.foldedIn(r)) {
        L.recv_(p, recvReduceCopyStep(r - 1, inRef(q0), outRef(q0), len));
        partial = true;
      }
      auto cur = [&](uint64_t off) { return partial ? outRef(off) : inRef(off); };
      int lo = 0, hi = f.p;
      for (int m = f.p / 2; m >= 1; m /= 2) {
        const int peer = f.real(v ^ m), mid = (lo + hi) / 2;
        const int klo = (v & m) ? mid : lo, khi = (v & m) ? hi : mid;
        const int slo = (v & m) ? lo : mid, shi = (v & m) ? mid : hi;
        L.sendAfterLast(p, sendStep(peer, cur(at(slo)), span(slo, shi)));
        L.recv_(p, recvReduceCopyStep(peer, cur(at(klo)), outRef(at(klo)), span(klo, khi)));
        partial = true;
        lo = klo;
        hi = khi;
      }
      for (int m = 1; m < f.p; m *= 2) {
        const int peer = f.real(v ^ m), mine = v & ~(m - 1), theirs = (v ^ m) & ~(m - 1);
        L.sendAfterLast(p, sendStep(peer, outRef(at(mine)), span(mine, mine + m)));
        L.recv_(p, recvStep(peer, outRef(at(theirs)), span(theirs, theirs + m)));
      }
      if (f.foldedIn(r)) L.sendAfterLast(p, sendStep(r - 1, outRef(q0), len));
    }
  }
  return plan;
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
  Plan plan = emptyPlan(spec, "rhd");
  const Fold f(spec.nranks);
  const uint64_t cnt = spec.count;
  const auto parts = splitEven(cnt, o.channels, alignElems(spec));
  for (int r = 0; r < f.n; ++r) {
    Program& p = plan.programs[r];
    for (int c = 0; c < o.channels; ++c) {
      const uint64_t q0 = parts[c], q1 = parts[c + 1], len = q1 - q0;
      if (len == 0) continue;
      auto blocks = [&](int s0, int s1) { return pieces(s0, s1, cnt, q0, q1, false); };
      Lanes L{addLane(p, c), addLane(p, c)};
      L.recv_(p, copyStep(inRef(q0), outRef(r * cnt + q0), len));
      if (f.foldedOut(r)) {
        L.sendAfterLast(p, sendStep(r + 1, inRef(q0), len));
        for (int s : {0, 1}) {
          for (const Piece& x : s ? blocks(r + 1, f.n) : blocks(0, r))
            L.recv_(p, recvStep(r + 1, outRef(x.off), x.count));
        }
        continue;
      }
      const int v = f.virt(r);
      if (f.foldedIn(r)) L.recv_(p, recvStep(r - 1, outRef((r - 1) * cnt + q0), len));
      for (int m = 1; m < f.p; m *= 2) {
        const int peer = f.real(v ^ m), mine = v & ~(m - 1), theirs = (v ^ m) & ~(m - 1);
        for (const Piece& x : blocks(f.firstReal(mine), f.firstReal(mine + m)))
          L.sendAfterLast(p, sendStep(peer, outRef(x.off), x.count));
        for (const Piece& x : blocks(f.firstReal(theirs), f.firstReal(theirs + m)))
          L.recv_(p, recvStep(peer, outRef(x.off), x.count));
      }
      if (f.foldedIn(r)) {
        for (int s : {0, 1}) {
          for (const Piece& x : s ? blocks(r, f.n) : blocks(0, r - 1))
            L.sendAfterLast(p, sendStep(r - 1, outRef(x.off), x.count));
        }
      }
    }
  }
  return plan;
}

// Running sums live in scratch laid out like the input (n * count elements); the final block of
// each rank lands in its output.
Plan reduceScatter(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "rhd");
  const Fold f(spec.nranks);
  const uint64_t cnt = spec.count;
  const auto parts = splitEven(cnt, o.channels, alignElems(spec));
  for (int r = 0; r < f.n; ++r) {
    Program& p = plan.programs[r];
    for (int c = 0; c < o.channels; ++c) {
      const uint64_t q0 = parts[c], q1 = parts[c + 1], len = q1 - q0;
      if (len == 0) continue;
      auto blocks = [&](int s0, int s1, bool perRank) {
        return pieces(s0, s1, cnt, q0, q1, perRank);
      };
      Lanes L{addLane(p, c), addLane(p, c)};
      if (f.foldedOut(r)) {
        for (const Piece& x : blocks(0, f.n, false))
          L.sendAfterLast(p, sendStep(r + 1, inRef(x.off), x.count));
        L.recv_(p, recvStep(r + 1, outRef(q0), len));
        continue;
      }
      p.scratchElems = f.n * cnt;
      const int v = f.virt(r);
      bool partial = false;  // whether the running sums live in scratch (else: input)
      if (f.foldedIn(r)) {
        for (const Piece& x : blocks(0, f.n, false))
          L.recv_(p, recvReduceCopyStep(r - 1, inRef(x.off), scratchRef(x.off), x.count));
        partial = true;
      }
      auto cur = [&](uint64_t off) { return partial ? scratchRef(off) : inRef(off); };
      int lo = 0, hi = f.p;
      for (int m = f.p / 2; m >= 1; m /= 2) {
        const int peer = f.real(v ^ m), mid = (lo + hi) / 2;
        const int klo = (v & m) ? mid : lo, khi = (v & m) ? hi : mid;
        const int slo = (v & m) ? lo : mid, shi = (v & m) ? mid : hi;
        const bool last = m == 1;  // the kept blocks are final: split them per rank
        for (const Piece& x : blocks(f.firstReal(slo), f.firstReal(shi), last))
          L.sendAfterLast(p, sendStep(peer, cur(x.off), x.count));
        for (const Piece& x : blocks(f.firstReal(klo), f.firstReal(khi), last)) {
          Ref dst = last && x.rank == r ? outRef(q0) : scratchRef(x.off);
          L.recv_(p, recvReduceCopyStep(peer, cur(x.off), dst, x.count));
        }
        partial = true;
        lo = klo;
        hi = khi;
      }
      if (f.foldedIn(r)) L.sendAfterLast(p, sendStep(r - 1, scratchRef((r - 1) * cnt + q0), len));
    }
  }
  return plan;
}

}  // namespace

Plan buildRhd(const Spec& spec, const Options& options) {
  checkSpec(spec, options);
  Plan plan;
  if (trivialPlan(spec, "rhd", &plan)) return plan;
  switch (spec.coll) {
    case Collective::kAllReduce:
      return allReduce(spec, options);
    case Collective::kAllGather:
      return allGather(spec, options);
    case Collective::kReduceScatter:
      return reduceScatter(spec, options);
    default:
      break;
  }
  throw Error(Status::kInvalidArgument,
              std::string("rhd does not implement ") + plan::collectiveName(spec.coll));
}

}  // namespace weft::algo
