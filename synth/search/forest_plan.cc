#include "synth/search/forest_plan.h"

#include <algorithm>
#include <set>
#include <utility>

#include "algorithms/common/builder.h"
#include "src/common/error.h"

namespace weft::synth {
namespace {

using algo::addStep;
using algo::copyStep;
using algo::inRef;
using algo::outRef;
using algo::recvCopySendStep;
using algo::recvReduceCopyStep;
using algo::recvReduceSendStep;
using algo::recvStep;
using algo::reduceStep;
using algo::scratchRef;
using algo::sendStep;
using plan::Collective;
using plan::Ref;
using plan::Step;
using plan::StepRef;

[[noreturn]] void reject(const std::string& what) {
  throw Error(Status::kInvalidArgument, "forest plan: " + what);
}

bool downward(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kAllGather || c == Collective::kAllReduce;
}
bool upward(Collective c) {
  return c == Collective::kReduce || c == Collective::kReduceScatter || c == Collective::kAllReduce;
}

// The down half of a tree job at one rank. The root sends every piece to each child on a lane
// of its own, so it feeds all its links at once; any other rank receives each piece (streaming
// it on to its first child) on one lane and feeds further children from the received chunk on
// lanes of their own. `rootSrc(a)` is the root's data, `deps(i, a, m)` what piece i waits for,
// `newLane()` a fresh lane of the job's channel.
template <class Src, class Deps, class NewLane>
void emitDown(plan::ChunkProgram& p, bool isRoot, int par, const std::vector<int>& ch,
              const std::vector<std::pair<uint64_t, uint64_t>>& pieces, Src rootSrc, Deps deps,
              NewLane newLane) {
  if (isRoot) {
    for (int c : ch) {
      const int lane = newLane();
      for (size_t i = 0; i < pieces.size(); ++i) {
        const auto [a, m] = pieces[i];
        Step st = sendStep(c, rootSrc(a), m);
        st.deps = deps(i, a, m);
        addStep(p.lanes, lane, std::move(st));
      }
    }
    return;
  }
  const int down = newLane();
  std::vector<int> side;
  for (size_t k = 1; k < ch.size(); ++k) side.push_back(newLane());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto [a, m] = pieces[i];
    Step st = ch.empty() ? recvStep(par, outRef(a), m) : recvCopySendStep(par, ch[0], outRef(a), m);
    st.deps = deps(i, a, m);
    const StepRef got = addStep(p.lanes, down, std::move(st));
    for (size_t k = 1; k < ch.size(); ++k) {
      Step fwd = sendStep(ch[k], outRef(a), m);
      fwd.deps.push_back(got);
      addStep(p.lanes, side[k - 1], std::move(fwd));
    }
  }
}

// Rejects a job whose chunk range, piece sizes or explicit ranges do not fit [0, C).
void checkRanges(const TreeJob& j, uint64_t C, const std::string& name) {
  if (!j.ranges.empty()) {
    uint64_t sum = 0;
    for (const auto& [a, m] : j.ranges) {
      if (m == 0 || a + m > C) reject(name + " has a bad chunk range");
      sum += m;
    }
    if (sum != j.count) reject(name + "'s ranges do not add up to its chunk count");
    return;
  }
  if (j.count == 0 || j.first + j.count > C) reject(name + " has a bad chunk range");
  uint64_t pieceSum = 0;
  for (uint64_t m : j.pieceSizes) pieceSum += m;
  if (!j.pieceSizes.empty() && pieceSum != j.count)
    reject(name + "'s piece sizes do not add up to its chunk count");
}

// Per rank, its children in the job's tree.
std::vector<std::vector<int>> kidsOf(const TreeJob& j) {
  std::vector<std::vector<int>> kids(j.parent.size());
  for (size_t r = 0; r < j.parent.size(); ++r)
    if (j.parent[r] >= 0) kids[j.parent[r]].push_back(static_cast<int>(r));
  return kids;
}

// Piece boundaries of [first, first + count): `pieces` near-equal whole-chunk pieces.
std::vector<std::pair<uint64_t, uint64_t>> piecesOf(const TreeJob& j) {
  if (!j.ranges.empty()) return j.ranges;
  if (!j.pieceSizes.empty()) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    uint64_t a = j.first;
    for (uint64_t m : j.pieceSizes)
      if (m > 0) out.push_back({a, m}), a += m;
    return out;
  }
  const uint64_t k = std::min(j.count, j.pieces == 0 ? j.count : j.pieces);
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t i = 0; i < k; ++i) {
    const uint64_t a = j.first + j.count * i / k, b = j.first + j.count * (i + 1) / k;
    if (b > a) out.push_back({a, b - a});
  }
  return out;
}

// Drops lanes without steps, renumbering dependencies and `owner` (per rank and lane).
void dropEmptyLanes(plan::ChunkPlan& cp, std::vector<std::vector<int>>& owner) {
  for (size_t r = 0; r < cp.programs.size(); ++r) {
    auto& p = cp.programs[r];
    std::vector<int> keptOwner;
    for (size_t l = 0; l < p.lanes.size(); ++l)
      if (!p.lanes[l].steps.empty()) keptOwner.push_back(owner[r][l]);
    owner[r] = std::move(keptOwner);
    bool anyEmpty = false;
    for (const auto& l : p.lanes) anyEmpty |= l.steps.empty();
    if (!anyEmpty) continue;
    std::vector<int> newIndex(p.lanes.size(), -1);
    std::vector<plan::Lane> kept;
    for (size_t l = 0; l < p.lanes.size(); ++l)
      if (!p.lanes[l].steps.empty()) {
        newIndex[l] = static_cast<int>(kept.size());
        kept.push_back(std::move(p.lanes[l]));
      }
    for (auto& l : kept)
      for (auto& s : l.steps)
        for (auto& d : s.deps) d.lane = newIndex[d.lane];
    p.lanes = std::move(kept);
  }
}

// Every lane's share of link bandwidth is its job's data (chunks): jobs sharing a link then
// move their data at rates in proportion to it and finish together, as the packing intends.
// `b` continues the job indices of `a` (the down jobs of an allreduce).
void setShares(plan::ChunkPlan& cp, const std::vector<std::vector<int>>& owner,
               const std::vector<TreeJob>& a, const std::vector<TreeJob>& b) {
  for (size_t r = 0; r < cp.programs.size(); ++r)
    for (size_t l = 0; l < cp.programs[r].lanes.size(); ++l) {
      const int j = owner[r][l];
      if (j < 0) continue;
      const TreeJob& job = static_cast<size_t>(j) < a.size() ? a[j] : b[j - a.size()];
      cp.programs[r].lanes[l].share = static_cast<uint32_t>(std::max<uint64_t>(1, job.count));
    }
}

// Keeps, per lane, only the latest of `deps` (earlier steps of a lane are implied).
std::vector<StepRef> latestPerLane(const std::vector<StepRef>& deps) {
  std::vector<StepRef> out;
  for (const StepRef& d : deps) {
    bool merged = false;
    for (StepRef& o : out)
      if (o.lane == d.lane) {
        o.step = std::max(o.step, d.step);
        merged = true;
      }
    if (!merged) out.push_back(d);
  }
  return out;
}

}  // namespace

std::vector<uint64_t> rampedPieces(uint64_t count, uint64_t steady, bool roundUp) {
  steady = std::max<uint64_t>(1, steady);
  const uint64_t big = std::max<uint64_t>(1, (count + (roundUp ? steady + 1 : 0)) / (steady + 2));
  std::vector<uint64_t> head, tail;
  uint64_t left = count;
  // Doubling ramps at both ends while they fit.
  for (uint64_t m = 1; m < big && 2 * m <= left; m *= 2) {
    head.push_back(m);
    tail.push_back(m);
    left -= 2 * m;
  }
  std::vector<uint64_t> out = head;
  // The middle in near-equal pieces of at most `big` chunks.
  const uint64_t k = (left + big - 1) / big;
  for (uint64_t i = 0; i < k; ++i) out.push_back(left * (i + 1) / k - left * i / k);
  out.insert(out.end(), tail.rbegin(), tail.rend());
  return out;
}

int treeRoot(const std::vector<int>& parent) {
  const int n = static_cast<int>(parent.size());
  int root = -1;
  for (int r = 0; r < n; ++r) {
    if (parent[r] == -1) {
      if (root >= 0) return -1;
      root = r;
    } else if (parent[r] < 0 || parent[r] >= n || parent[r] == r) {
      return -1;
    }
  }
  if (root < 0) return -1;
  // Every rank must reach the root within n steps.
  for (int r = 0; r < n; ++r) {
    int v = r, steps = 0;
    while (v != root && steps <= n) v = parent[v], ++steps;
    if (v != root) return -1;
  }
  return root;
}

std::vector<int> forestChannels(Collective coll, const std::vector<TreeJob>& jobs) {
  std::vector<std::set<std::pair<int, int>>> used;  // per channel: directed pairs in use
  std::vector<int> channels;
  for (const TreeJob& j : jobs) {
    std::set<std::pair<int, int>> pairs;
    for (int r = 0; r < static_cast<int>(j.parent.size()); ++r) {
      if (j.parent[r] < 0) continue;
      if (downward(coll)) pairs.insert({j.parent[r], r});
      if (upward(coll)) pairs.insert({r, j.parent[r]});
    }
    int c = 0;
    for (;; ++c) {
      if (c == static_cast<int>(used.size())) used.emplace_back();
      bool clash = false;
      for (const auto& e : pairs) clash |= used[c].count(e) > 0;
      if (!clash) break;
    }
    used[c].insert(pairs.begin(), pairs.end());
    channels.push_back(c);
  }
  return channels;
}

plan::ChunkPlan forestPlan(Collective coll, int n, int root, uint64_t C,
                           const std::vector<TreeJob>& jobs, const std::string& name,
                           std::vector<std::vector<int>>* laneJobs) {
  const bool perRoot = coll == Collective::kAllGather || coll == Collective::kReduceScatter;
  const bool rooted = coll == Collective::kBroadcast || coll == Collective::kReduce;
  if (!perRoot && !rooted && coll != Collective::kAllReduce)
    reject(std::string("no tree schedule for ") + plan::collectiveName(coll));
  if (n < 1) reject("nranks " + std::to_string(n));
  if (rooted && (root < 0 || root >= n)) reject("root " + std::to_string(root) + " is not a rank");
  if (C == 0 || (perRoot && C % n != 0))
    reject(std::to_string(C) + " chunks per loop do not split into " + std::to_string(n) +
           " ranks' blocks");
  const uint64_t block = perRoot ? C / n : C;  // chunks of one rank's block
  std::vector<int> cover(C, 0);
  std::vector<int> roots;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TreeJob& j = jobs[i];
    const std::string name = "job " + std::to_string(i);
    if (static_cast<int>(j.parent.size()) != n) reject(name + " does not span the ranks");
    const int r = treeRoot(j.parent);
    if (r < 0) reject(name + " is not a spanning tree");
    checkRanges(j, C, name);
    if (rooted && r != root) reject(name + " is not rooted at " + std::to_string(root));
    for (const auto& [a, m] : piecesOf(j)) {
      if (perRoot && (a / block != static_cast<uint64_t>(r) ||
                      (a + m - 1) / block != static_cast<uint64_t>(r)))
        reject(name + " (root " + std::to_string(r) + ") leaves its root's block");
      for (uint64_t c = a; c < a + m; ++c) ++cover[c];
    }
    roots.push_back(r);
  }
  for (uint64_t c = 0; c < C; ++c)
    if (cover[c] != 1)
      reject("chunk " + std::to_string(c) + " is carried by " + std::to_string(cover[c]) + " jobs");

  plan::ChunkPlan cp;
  cp.name = name;
  cp.coll = coll;
  cp.nranks = n;
  cp.root = rooted ? root : 0;
  cp.chunksPerLoop = C;
  cp.programs.resize(n);
  for (int r = 0; r < n; ++r) {
    plan::ChunkProgram& p = cp.programs[r];
    p.inputChunks = coll == Collective::kAllGather ? block : C;
    p.outputChunks = coll == Collective::kReduceScatter ? block : C;
    if (coll == Collective::kReduceScatter || coll == Collective::kReduce) p.scratchChunks = C;
  }
  const std::vector<int> channels = forestChannels(coll, jobs);
  std::vector<std::vector<int>> owner(n);  // per rank and lane: the job it serves

  // Scratch layout per rank: [0, C) partial sums of reduce / reduce-scatter, then C chunks per
  // extra child of an in-tree node (its contribution lands there before it is added).
  for (size_t ji = 0; ji < jobs.size(); ++ji) {
    const TreeJob& j = jobs[ji];
    const int tr = roots[ji];
    const int channel = channels[ji];
    const std::vector<std::vector<int>> kids = kidsOf(j);
    const auto pieces = piecesOf(j);
    for (int r = 0; r < n; ++r) {
      plan::ChunkProgram& p = cp.programs[r];
      auto addLane = [&](plan::ChunkProgram& prog, int ch) {
        owner[r].push_back(static_cast<int>(ji));
        return algo::addLane(prog.lanes, ch);
      };
      const int par = j.parent[r];
      const auto& ch = kids[r];
      // Where rank r keeps the partial sum of loop chunk a (the tree root: its result).
      auto acc = [&](uint64_t a) -> Ref {
        if (coll == Collective::kAllReduce) return outRef(a);
        if (r == tr) return outRef(coll == Collective::kReduceScatter ? a - tr * block : a);
        return scratchRef(a);
      };
      auto extra = [&](size_t k, uint64_t a) { return scratchRef(k * C + a); };
      std::vector<StepRef> upEnd;  // per piece: the last up step (allreduce hands over)
      if (upward(coll)) {
        // Children beyond the first deliver into scratch on lanes of their own, so all
        // children's links stream at once; the first child's data is reduced on the fly.
        if (ch.size() > 1) p.scratchChunks = std::max<uint64_t>(p.scratchChunks, ch.size() * C);
        std::vector<int> side;
        for (size_t k = 1; k < ch.size(); ++k) side.push_back(addLane(p, channel));
        const int up = addLane(p, channel);
        for (const auto& [a, m] : pieces) {
          std::vector<StepRef> got;
          for (size_t k = 1; k < ch.size(); ++k)
            got.push_back(addStep(p.lanes, side[k - 1], recvStep(ch[k], extra(k, a), m)));
          // The local operand: the input, or the input plus the extra children's data.
          Ref own = inRef(a);
          if (!got.empty()) {
            own = acc(a);
            addStep(p.lanes, up, copyStep(inRef(a), own, m));
            for (size_t k = 1; k < ch.size(); ++k) {
              Step st = reduceStep(extra(k, a), own, m);
              st.deps.push_back(got[k - 1]);
              addStep(p.lanes, up, std::move(st));
            }
          }
          StepRef last{};
          if (ch.empty() && par < 0)
            last = addStep(p.lanes, up, copyStep(inRef(a), acc(a), m));
          else if (ch.empty())
            last = addStep(p.lanes, up, sendStep(par, inRef(a), m));
          else if (par >= 0)
            last = addStep(p.lanes, up, recvReduceSendStep(ch[0], par, own, m));
          else
            last = addStep(p.lanes, up, recvReduceCopyStep(ch[0], own, acc(a), m));
          upEnd.push_back(last);
        }
      }
      if (downward(coll)) {
        const bool ag = coll == Collective::kAllGather;
        // The root's own data: its input (broadcast, allgather) or its reduced output.
        auto rootSrc = [&](uint64_t a) {
          return coll == Collective::kAllReduce ? outRef(a) : inRef(ag ? a - tr * block : a);
        };
        if (r == tr && coll != Collective::kAllReduce) {
          const int copy = addLane(p, channel);
          if (j.ranges.empty())
            addStep(p.lanes, copy,
                    copyStep(inRef(ag ? j.first - tr * block : j.first), outRef(j.first), j.count));
          for (const auto& [a, m] : j.ranges)
            addStep(p.lanes, copy, copyStep(inRef(ag ? a - tr * block : a), outRef(a), m));
        }
        emitDown(
            p, r == tr, par, ch, pieces, rootSrc,
            [&](size_t i, uint64_t, uint64_t) {
              return upEnd.empty() ? std::vector<StepRef>{} : std::vector<StepRef>{upEnd[i]};
            },
            [&] { return addLane(p, channel); });
      }
    }
  }
  dropEmptyLanes(cp, owner);
  setShares(cp, owner, jobs, {});
  if (laneJobs) *laneJobs = std::move(owner);
  return cp;
}

}  // namespace weft::synth

namespace weft::synth {

plan::ChunkPlan forestPlanAllReduce(int n, uint64_t C, const std::vector<TreeJob>& upJobs,
                                    const std::vector<TreeJob>& downJobs, const std::string& name,
                                    std::vector<std::vector<int>>* laneJobs) {
  if (n < 1) reject("nranks " + std::to_string(n));
  if (C == 0) reject("no chunks per loop");
  // Per chunk: the root of the job reducing it, and of the job broadcasting it.
  auto check = [&](const std::vector<TreeJob>& jobs, const char* phase) {
    std::vector<int> rootOf(C, -1);
    std::vector<int> roots;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const TreeJob& j = jobs[i];
      const std::string what = std::string(phase) + " job " + std::to_string(i);
      if (static_cast<int>(j.parent.size()) != n) reject(what + " does not span the ranks");
      const int r = treeRoot(j.parent);
      if (r < 0) reject(what + " is not a spanning tree");
      checkRanges(j, C, what);
      for (const auto& [a, m] : piecesOf(j))
        for (uint64_t c = a; c < a + m; ++c) {
          if (rootOf[c] >= 0)
            reject("chunk " + std::to_string(c) + " is in two " + phase + " jobs");
          rootOf[c] = r;
        }
      roots.push_back(r);
    }
    for (uint64_t c = 0; c < C; ++c)
      if (rootOf[c] < 0) reject("chunk " + std::to_string(c) + " is in no " + phase + " job");
    return std::make_pair(rootOf, roots);
  };
  const auto [upRootOf, upRoots] = check(upJobs, "reduce");
  const auto [downRootOf, downRoots] = check(downJobs, "broadcast");
  for (uint64_t c = 0; c < C; ++c)
    if (upRootOf[c] != downRootOf[c])
      reject("chunk " + std::to_string(c) + " is reduced to rank " + std::to_string(upRootOf[c]) +
             " but broadcast from rank " + std::to_string(downRootOf[c]));

  plan::ChunkPlan cp;
  cp.name = name;
  cp.coll = Collective::kAllReduce;
  cp.nranks = n;
  cp.root = 0;
  cp.chunksPerLoop = C;
  cp.programs.resize(n);
  for (auto& p : cp.programs) p.inputChunks = p.outputChunks = C;
  std::vector<std::vector<int>> owner(n);
  const std::vector<int> upChannels = forestChannels(Collective::kReduceScatter, upJobs);
  std::vector<int> downChannels = forestChannels(Collective::kAllGather, downJobs);
  int firstDown = 0;
  for (int c : upChannels) firstDown = std::max(firstDown, c + 1);
  for (int& c : downChannels) c += firstDown;
  // Per rank and chunk: the up step that last touches out(c) (at the root: the one that leaves
  // the full sum there).
  std::vector<std::vector<StepRef>> lastUp(n, std::vector<StepRef>(C, StepRef{-1, -1}));

  // Reduce phase: as the reduce-scatter of forestPlan, partial sums in the output buffer.
  for (size_t ji = 0; ji < upJobs.size(); ++ji) {
    const TreeJob& j = upJobs[ji];
    const int channel = upChannels[ji];
    const std::vector<std::vector<int>> kids = kidsOf(j);
    const auto pieces = piecesOf(j);
    for (int r = 0; r < n; ++r) {
      plan::ChunkProgram& p = cp.programs[r];
      auto lane = [&](int ch) {
        owner[r].push_back(static_cast<int>(ji));
        return algo::addLane(p.lanes, ch);
      };
      const int par = j.parent[r];
      const auto& ch = kids[r];
      auto extra = [&](size_t k, uint64_t a) { return scratchRef((k - 1) * C + a); };
      if (ch.size() > 1) p.scratchChunks = std::max<uint64_t>(p.scratchChunks, (ch.size() - 1) * C);
      std::vector<int> side;
      for (size_t k = 1; k < ch.size(); ++k) side.push_back(lane(channel));
      const int up = lane(channel);
      auto touch = [&](StepRef at, uint64_t a, uint64_t m) {
        for (uint64_t c = a; c < a + m; ++c) lastUp[r][c] = at;
      };
      for (const auto& [a, m] : pieces) {
        std::vector<StepRef> got;
        for (size_t k = 1; k < ch.size(); ++k)
          got.push_back(addStep(p.lanes, side[k - 1], recvStep(ch[k], extra(k, a), m)));
        Ref own = inRef(a);
        if (!got.empty()) {
          own = outRef(a);
          touch(addStep(p.lanes, up, copyStep(inRef(a), own, m)), a, m);
          for (size_t k = 1; k < ch.size(); ++k) {
            Step st = reduceStep(extra(k, a), own, m);
            st.deps.push_back(got[k - 1]);
            touch(addStep(p.lanes, up, std::move(st)), a, m);
          }
        }
        if (ch.empty() && par < 0)
          touch(addStep(p.lanes, up, copyStep(inRef(a), outRef(a), m)), a, m);
        else if (ch.empty())
          addStep(p.lanes, up, sendStep(par, inRef(a), m));
        else if (par >= 0)
          touch(addStep(p.lanes, up, recvReduceSendStep(ch[0], par, own, m)), a, m);
        else
          touch(addStep(p.lanes, up, recvReduceCopyStep(ch[0], own, outRef(a), m)), a, m);
      }
    }
  }
  // A step of rank r touching out[a, a + m) after the reduce phase: it waits for the up steps
  // that touch those chunks there (at a root: the full sums).
  auto after = [&](int r, uint64_t a, uint64_t m) {
    std::vector<StepRef> deps;
    for (uint64_t c = a; c < a + m; ++c)
      if (lastUp[r][c].lane >= 0) deps.push_back(lastUp[r][c]);
    return latestPerLane(deps);
  };

  // Broadcast phase: as the allgather of forestPlan, from the root's output.
  for (size_t ji = 0; ji < downJobs.size(); ++ji) {
    const TreeJob& j = downJobs[ji];
    const int tr = downRoots[ji];
    const int channel = downChannels[ji];
    const std::vector<std::vector<int>> kids = kidsOf(j);
    const auto pieces = piecesOf(j);
    for (int r = 0; r < n; ++r) {
      plan::ChunkProgram& p = cp.programs[r];
      auto lane = [&](int ch) {
        owner[r].push_back(static_cast<int>(upJobs.size() + ji));
        return algo::addLane(p.lanes, ch);
      };
      const int par = j.parent[r];
      const auto& ch = kids[r];
      emitDown(
          p, r == tr, par, ch, pieces, outRef,
          [&](size_t, uint64_t a, uint64_t m) { return after(r, a, m); },
          [&] { return lane(channel); });
    }
  }
  dropEmptyLanes(cp, owner);
  setShares(cp, owner, upJobs, downJobs);
  if (laneJobs) *laneJobs = std::move(owner);
  return cp;
}

}  // namespace weft::synth
