#include "synth/search/ring_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "algorithms/common/builder.h"
#include "src/common/error.h"
#include "synth/search/apportion.h"

namespace weft::synth {
namespace {

using algo::copyStep;
using algo::inRef;
using algo::outRef;
using algo::recvCopySendStep;
using algo::recvReduceCopyStep;
using algo::recvReduceSendStep;
using algo::recvStep;
using algo::scratchRef;
using algo::sendStep;
using plan::Collective;
using plan::Ref;
using plan::Step;
using plan::StepRef;

int checkRings(const std::vector<Ring>& rings) {
  if (rings.empty()) throw Error(Status::kInvalidArgument, "ring plan: no rings");
  const int n = static_cast<int>(rings[0].order.size());
  if (n < 1) throw Error(Status::kInvalidArgument, "ring plan: ring 0 is empty");
  for (size_t i = 0; i < rings.size(); ++i) {
    const auto& o = rings[i].order;
    std::vector<char> seen(n, 0);
    bool ok = static_cast<int>(o.size()) == n;
    for (int r : o) {
      ok = ok && r >= 0 && r < n && !seen[r];
      if (ok) seen[r] = 1;
    }
    if (!ok)
      throw Error(Status::kInvalidArgument, "ring plan: ring " + std::to_string(i) +
                                                " is not a permutation of ranks 0.." +
                                                std::to_string(n - 1));
    if (!(rings[i].bw > 0))
      throw Error(Status::kInvalidArgument,
                  "ring plan: ring " + std::to_string(i) + " has no bandwidth");
  }
  return n;
}

}  // namespace

std::vector<uint64_t> ringShares(const std::vector<Ring>& rings, const RingPlanOptions& o) {
  checkRings(rings);
  std::vector<double> w;
  for (const Ring& r : rings) w.push_back(std::isinf(r.bw) ? 1.0 : r.bw);
  return apportion(w, chooseTotal(w, o.maxUnits, o.minEfficiency));
}

plan::ChunkPlan ringPlan(Collective coll, const std::vector<Ring>& rings,
                         const RingPlanOptions& o) {
  const int n = checkRings(rings);
  const bool rooted = coll == Collective::kBroadcast || coll == Collective::kReduce;
  if (rooted && (o.root < 0 || o.root >= n))
    throw Error(Status::kInvalidArgument, "ring plan: root " + std::to_string(o.root) +
                                              " is not a rank of " + std::to_string(n));
  if (coll != Collective::kAllGather && coll != Collective::kReduceScatter &&
      coll != Collective::kAllReduce && !rooted)
    throw Error(Status::kInvalidArgument,
                std::string("ring plan: no ring schedule for ") + plan::collectiveName(coll));
  const std::vector<uint64_t> shares = ringShares(rings, o);
  uint64_t units = 0;
  for (uint64_t s : shares) units += s;

  plan::ChunkPlan cp;
  cp.name = std::string("ring-") + plan::collectiveName(coll);
  cp.coll = coll;
  cp.nranks = n;
  cp.root = rooted ? o.root : 0;
  const uint64_t perRank = coll == Collective::kAllReduce ? units * n : units;  // chunks
  cp.chunksPerLoop =
      coll == Collective::kAllGather || coll == Collective::kReduceScatter ? perRank * n : perRank;
  cp.programs.resize(n);
  for (int r = 0; r < n; ++r) {
    plan::ChunkProgram& p = cp.programs[r];
    switch (coll) {
      case Collective::kAllGather:
        p.inputChunks = perRank, p.outputChunks = perRank * n;
        break;
      case Collective::kReduceScatter:
        p.inputChunks = perRank * n, p.outputChunks = perRank;
        break;
      default:
        p.inputChunks = p.outputChunks = perRank;
        break;
    }
  }
  if (n == 1) {
    plan::Lane lane;
    lane.steps.push_back(copyStep(inRef(0), outRef(0), perRank));
    cp.programs[0].lanes.push_back(lane);
    return cp;
  }

  uint64_t first = 0;                       // first unit of the current ring
  std::vector<uint64_t> scratchBase(n, 0);  // scratch chunks taken by earlier rings
  for (size_t ri = 0; ri < rings.size(); ++ri) {
    const uint64_t w = shares[ri];
    const std::vector<int>& ord = rings[ri].order;
    const uint64_t start = first;
    first += w;
    if (w == 0) continue;
    std::vector<int> pos(n);
    for (int i = 0; i < n; ++i) pos[ord[i]] = i;
    auto at = [&](int i) { return ord[((i % n) + n) % n]; };
    for (int r = 0; r < n; ++r) {
      const int p = pos[r], next = at(p + 1), prev = at(p - 1);
      uint64_t scratchUsed = scratchBase[r];
      plan::ChunkProgram& prog = cp.programs[r];
      // Cyclic schedules (allgather, reduce-scatter, allreduce) receive on their own lane and
      // forward whole blocks from a send lane: a lane that both waited for its predecessor and
      // fed its successor would deadlock the ring once a block outgrows the FIFO. The chains of
      // broadcast and reduce are acyclic and stream through one lane.
      const int32_t sendLane = static_cast<int32_t>(prog.lanes.size());
      prog.lanes.push_back({});
      prog.lanes.back().channel = static_cast<int>(ri);
      const bool cyclic = coll != Collective::kBroadcast && coll != Collective::kReduce;
      const int32_t recvLane = cyclic ? sendLane + 1 : sendLane;
      if (cyclic) {
        prog.lanes.push_back({});
        prog.lanes.back().channel = static_cast<int>(ri);
      }
      auto add = [&](int32_t lane, Step st) {
        auto& steps = prog.lanes[lane].steps;
        steps.push_back(std::move(st));
        return StepRef{lane, static_cast<int32_t>(steps.size()) - 1};
      };
      auto forward = [&](Ref src, StepRef after) {
        Step st = sendStep(next, src, w);
        st.deps.push_back(after);
        add(sendLane, std::move(st));
      };
      auto& s = prog.lanes[sendLane].steps;
      switch (coll) {
        case Collective::kAllGather: {
          // Block of rank q: output[q * units + start, +w); it travels n - 1 hops.
          s.push_back(copyStep(inRef(start), outRef(r * units + start), w));
          s.push_back(sendStep(next, inRef(start), w));
          for (int k = 1; k < n; ++k) {
            const Ref dst = outRef(at(p - k) * units + start);
            const StepRef got = add(recvLane, recvStep(prev, dst, w));
            if (k < n - 1) forward(dst, got);
          }
          break;
        }
        case Collective::kReduceScatter:
        case Collective::kAllReduce: {
          // The block owned by rank q starts at q's successor and ends reduced at q. Partial
          // sums wait in scratch between the receive and the forward.
          const bool ar = coll == Collective::kAllReduce;
          auto blk = [&](int q) {
            return ar ? n * start + static_cast<uint64_t>(pos[q]) * w : q * units + start;
          };
          s.push_back(sendStep(next, inRef(blk(at(p - 1))), w));
          for (int k = 1; k < n; ++k) {
            const int owner = at(p - 1 - k);
            if (k < n - 1) {
              const Ref tmp = scratchRef(scratchUsed);
              scratchUsed += w;
              forward(tmp, add(recvLane, recvReduceCopyStep(prev, inRef(blk(owner)), tmp, w)));
            } else {
              const Ref dst = outRef(ar ? blk(owner) : start);
              const StepRef done =
                  add(recvLane, recvReduceCopyStep(prev, inRef(blk(owner)), dst, w));
              if (ar) forward(dst, done);
            }
          }
          if (!ar) break;
          for (int k = 1; k < n; ++k) {
            const Ref dst = outRef(blk(at(p - k)));
            const StepRef got = add(recvLane, recvStep(prev, dst, w));
            if (k < n - 1) forward(dst, got);
          }
          break;
        }
        case Collective::kBroadcast: {
          // Chain root, next, ..., prev(root).
          const int k = ((p - pos[o.root]) % n + n) % n;  // distance from the root
          if (k == 0) {
            s.push_back(copyStep(inRef(start), outRef(start), w));
            s.push_back(sendStep(next, inRef(start), w));
          } else if (k < n - 1) {
            s.push_back(recvCopySendStep(prev, next, outRef(start), w));
          } else {
            s.push_back(recvStep(prev, outRef(start), w));
          }
          break;
        }
        case Collective::kReduce: {
          // Chain next(root), ..., prev(root), root.
          const int k = ((p - pos[o.root]) % n + n) % n;
          if (k == 1)
            s.push_back(sendStep(next, inRef(start), w));
          else if (k != 0)
            s.push_back(recvReduceSendStep(prev, next, inRef(start), w));
          else
            s.push_back(recvReduceCopyStep(prev, inRef(start), outRef(start), w));
          break;
        }
        default:
          break;
      }
      prog.scratchChunks = std::max(prog.scratchChunks, scratchUsed);
      scratchBase[r] = scratchUsed;
    }
  }
  return cp;
}

}  // namespace weft::synth
