#include "synth/pack/pack_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "src/common/error.h"
#include "synth/search/apportion.h"
#include "synth/search/forest_plan.h"

namespace weft::synth {
namespace {

using plan::Collective;

TreeFlow flowOf(Collective c) {
  switch (c) {
    case Collective::kReduce:
    case Collective::kReduceScatter: return TreeFlow::kUp;
    case Collective::kAllReduce: return TreeFlow::kBoth;
    default: return TreeFlow::kDown;
  }
}

bool perRoot(Collective c) {
  return c == Collective::kAllGather || c == Collective::kReduceScatter ||
         c == Collective::kAllReduce;
}

// Chunks per tree (same order as pack.trees) for `chunks` chunks per root.
std::vector<uint64_t> shares(const PackResult& pack, int nranks, uint64_t chunks) {
  std::vector<uint64_t> out(pack.trees.size(), 0);
  for (int r = 0; r < nranks; ++r) {
    std::vector<double> w;
    std::vector<size_t> idx;
    for (size_t t = 0; t < pack.trees.size(); ++t)
      if (pack.trees[t].root == r) w.push_back(pack.trees[t].weight), idx.push_back(t);
    if (w.empty()) continue;
    const auto s = apportion(w, chunks);
    for (size_t k = 0; k < idx.size(); ++k) out[idx[k]] = s[k];
  }
  return out;
}

// Rate per root (GB/s) the rounded shares reach by the bottleneck link.
double roundedRate(const Fabric& f, const PackResult& pack, TreeFlow flow,
                   const std::vector<uint64_t>& share, uint64_t chunks) {
  std::vector<PackedTree> trees = pack.trees;
  for (size_t t = 0; t < trees.size(); ++t) trees[t].weight = static_cast<double>(share[t]);
  const auto load = packLinkLoads(f, trees, flow);
  double worst = 0;
  for (size_t l = 0; l < load.size(); ++l) worst = std::max(worst, load[l] / f.links[l].bw);
  return worst > 0 ? static_cast<double>(chunks) / worst : pack.rate;
}

// Moves single chunks between trees of the same root while that lowers the most loaded link's
// time: rounding by largest remainders ignores which links the trees share.
std::vector<uint64_t> improveShares(const Fabric& f, const PackResult& pack, TreeFlow flow,
                                    std::vector<uint64_t> share) {
  const size_t T = pack.trees.size(), L = f.links.size();
  std::vector<std::vector<std::pair<int, double>>> uses(T);  // per tree: (link, uses)
  std::vector<double> load(L, 0.0);
  for (size_t t = 0; t < T; ++t) {
    PackedTree one = pack.trees[t];
    one.weight = 1;
    const auto u = packLinkLoads(f, {one}, flow);
    for (size_t l = 0; l < L; ++l)
      if (u[l] > 0) uses[t].push_back({static_cast<int>(l), u[l] / f.links[l].bw});
    for (const auto& [l, x] : uses[t]) load[l] += x * share[t];
  }
  auto worst = [&](const std::vector<double>& ld) {
    double w = 0;
    int at = 0;
    for (double x : ld) {
      if (x > w + 1e-12) w = x, at = 1;
      else if (x > w - 1e-12) ++at;
    }
    return std::make_pair(w, at);
  };
  auto current = worst(load);
  for (int iter = 0; iter < 4096; ++iter) {
    auto best = current;
    size_t from = T, to = T;
    for (size_t a = 0; a < T; ++a) {
      if (share[a] == 0) continue;
      for (size_t b = 0; b < T; ++b) {
        if (b == a || pack.trees[b].root != pack.trees[a].root) continue;
        std::vector<double> ld = load;
        for (const auto& [l, x] : uses[a]) ld[l] -= x;
        for (const auto& [l, x] : uses[b]) ld[l] += x;
        const auto w = worst(ld);
        if (w.first < best.first - 1e-12 ||
            (w.first < best.first + 1e-12 && w.second < best.second))
          best = w, from = a, to = b;
      }
    }
    if (from == T) break;
    --share[from];
    ++share[to];
    for (const auto& [l, x] : uses[from]) load[l] -= x;
    for (const auto& [l, x] : uses[to]) load[l] += x;
    current = best;
  }
  return share;
}

// Few chunks per root: the fewest whose rounding keeps minEfficiency of the rate (else the best
// up to maxChunksPerRank), scaled for pipelining; one job per tree. Returns chunks per root.
uint64_t evenJobs(const Fabric& f, const PackResult& pack, TreeFlow flow, const PackPlanOptions& o,
                  bool perRootData, double* rateOut, std::vector<TreeJob>* jobs) {
  const int n = f.nranks;
  // The fewest chunks per root whose rounding keeps minEfficiency of the rate, else the best.
  uint64_t best = 1;
  double bestRate = -1;
  std::vector<uint64_t> share;
  for (uint64_t c = 1; c <= o.maxChunksPerRank; ++c) {
    std::vector<uint64_t> s = shares(pack, n, c);
    double rate = roundedRate(f, pack, flow, s, c);
    if (rate < o.minEfficiency * pack.rate) {
      // Largest remainders ignore which links trees share: repair by moving single chunks.
      std::vector<uint64_t> better = improveShares(f, pack, flow, s);
      const double r = roundedRate(f, pack, flow, better, c);
      if (r > rate) rate = r, s = std::move(better);
    }
    if (rate > bestRate * (1 + 1e-12)) best = c, bestRate = rate, share = std::move(s);
    if (rate >= o.minEfficiency * pack.rate) break;
  }
  // Pipelining: cut every tree's share into at least minPieces chunks where the chunk budget
  // allows (scaling all shares keeps the rate).
  uint64_t smallest = 0;
  for (uint64_t x : share)
    if (x > 0 && (smallest == 0 || x < smallest)) smallest = x;
  uint64_t factor = 1;
  while (smallest * factor < o.minPieces && best * (factor + 1) <= o.maxChunksPerRank) ++factor;
  for (uint64_t& x : share) x *= factor;
  best *= factor;
  *rateOut = bestRate;
  std::vector<uint64_t> used(n, 0);
  for (size_t t = 0; t < pack.trees.size(); ++t) {
    if (share[t] == 0) continue;
    const PackedTree& tree = pack.trees[t];
    TreeJob j;
    j.parent = tree.parent;
    j.first = (perRootData ? tree.root * best : 0) + used[tree.root];
    j.count = share[t];
    used[tree.root] += share[t];
    jobs->push_back(std::move(j));
  }
  return best;
}

// Many chunks per root, split over each root's trees by weight; every tree runs as concurrent
// jobs in proportion to its weight (the simulator and the links share bandwidth per transfer),
// each job in ramped pieces. Returns chunks per root.
uint64_t fineJobs(const Fabric& f, const PackResult& pack, TreeFlow flow, const PackPlanOptions& o,
                  bool perRootData, double* rateOut, std::vector<TreeJob>* jobs) {
  const int n = f.nranks;
  const uint64_t C = o.fineChunksPerRank;
  std::vector<uint64_t> share = shares(pack, n, C);
  if (roundedRate(f, pack, flow, share, C) < o.minEfficiency * pack.rate)
    share = improveShares(f, pack, flow, std::move(share));
  *rateOut = roundedRate(f, pack, flow, share, C);
  const std::vector<uint64_t> units = shares(pack, n, o.unitsPerRoot);
  std::vector<uint64_t> used(n, 0);
  for (size_t t = 0; t < pack.trees.size(); ++t) {
    if (share[t] == 0) continue;
    const PackedTree& tree = pack.trees[t];
    const uint64_t k = std::clamp<uint64_t>(units[t], 1, share[t]);
    for (uint64_t i = 0; i < k; ++i) {
      TreeJob j;
      j.parent = tree.parent;
      j.count = share[t] * (i + 1) / k - share[t] * i / k;
      j.first = (perRootData ? tree.root * C : 0) + used[tree.root];
      j.pieceSizes = rampedPieces(j.count, o.steadyPieces);
      used[tree.root] += j.count;
      jobs->push_back(std::move(j));
    }
  }
  return C;
}

}  // namespace

bool fineNeeded(const PackResult& pack) {
  for (const PackedTree& t : pack.trees) {
    std::vector<int> kids(t.parent.size(), 0);
    for (int p : t.parent)
      if (p >= 0 && ++kids[p] > 1) return true;
  }
  for (size_t t = 1; t < pack.trees.size(); ++t)
    if (pack.trees[t].root == pack.trees[t - 1].root &&
        std::abs(pack.trees[t].weight - pack.trees[t - 1].weight) > 1e-6 * pack.trees[t].weight)
      return true;
  return false;
}

PackResult packFor(Collective coll, const Fabric& f, int root, const PackOptions& o) {
  if (perRoot(coll)) {
    std::vector<int> roots;
    for (int r = 0; r < f.nranks; ++r) roots.push_back(r);
    return packTrees(f, roots, flowOf(coll), o);
  }
  if (coll == Collective::kBroadcast || coll == Collective::kReduce)
    return packTrees(f, {root}, flowOf(coll), o);
  throw Error(Status::kInvalidArgument,
              std::string("packing: no tree schedule for ") + plan::collectiveName(coll));
}

PackedPlan packPlanDetailed(Collective coll, const Fabric& f, int root,
                            const PackPlanOptions& o) {
  if (o.maxChunksPerRank < 1 || !(o.minEfficiency > 0 && o.minEfficiency <= 1))
    throw Error(Status::kInvalidArgument,
                "pack plan: maxChunksPerRank must be >= 1 and minEfficiency in (0, 1]");
  PackedPlan out;
  out.pack = packFor(coll, f, root, o.pack);
  const int n = f.nranks;
  const TreeFlow flow = flowOf(coll);
  if (n == 1) {  // one rank: a copy (the tree is the root alone)
    out.chunksPerRoot = 1;
    out.roundedRate = out.pack.rate;
    out.plan = forestPlan(coll, 1, root, 1, {TreeJob{{-1}, 0, 1, 0}},
                          std::string("pack-") + plan::collectiveName(coll));
    return out;
  }
  std::vector<TreeJob> jobs;
  const uint64_t best = fineNeeded(out.pack)
                            ? fineJobs(f, out.pack, flow, o, perRoot(coll), &out.roundedRate, &jobs)
                            : evenJobs(f, out.pack, flow, o, perRoot(coll), &out.roundedRate, &jobs);
  out.chunksPerRoot = best;
  const uint64_t C = perRoot(coll) ? best * n : best;
  out.plan = forestPlan(coll, n, root, C, jobs, std::string("pack-") + plan::collectiveName(coll));
  return out;
}

plan::ChunkPlan packPlan(Collective coll, const Fabric& f, int root, const PackPlanOptions& o) {
  return packPlanDetailed(coll, f, root, o).plan;
}

}  // namespace weft::synth
