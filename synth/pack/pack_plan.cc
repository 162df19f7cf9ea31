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

}  // namespace

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
  // The fewest chunks per root whose rounding keeps minEfficiency of the rate, else the best.
  uint64_t best = 1;
  double bestRate = -1;
  for (uint64_t c = 1; c <= o.maxChunksPerRank; ++c) {
    const double rate = n == 1 ? out.pack.rate : roundedRate(f, out.pack, flow, shares(out.pack, n, c), c);
    if (rate > bestRate * (1 + 1e-12)) best = c, bestRate = rate;
    if (rate >= o.minEfficiency * out.pack.rate) break;
  }
  out.chunksPerRoot = best;
  out.roundedRate = bestRate;
  const std::vector<uint64_t> share = shares(out.pack, n, best);
  std::vector<TreeJob> jobs;
  std::vector<uint64_t> used(n, 0);
  for (size_t t = 0; t < out.pack.trees.size(); ++t) {
    if (share[t] == 0) continue;
    const PackedTree& tree = out.pack.trees[t];
    TreeJob j;
    j.parent = tree.parent;
    j.first = (perRoot(coll) ? tree.root * best : 0) + used[tree.root];
    j.count = share[t];
    used[tree.root] += share[t];
    jobs.push_back(std::move(j));
  }
  const uint64_t C = perRoot(coll) ? best * n : best;
  out.plan = forestPlan(coll, n, root, C, jobs, std::string("pack-") + plan::collectiveName(coll));
  return out;
}

plan::ChunkPlan packPlan(Collective coll, const Fabric& f, int root, const PackPlanOptions& o) {
  return packPlanDetailed(coll, f, root, o).plan;
}

}  // namespace weft::synth
