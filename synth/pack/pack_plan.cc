#include "synth/pack/pack_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "src/common/error.h"
#include "synth/model/simulator.h"
#include "synth/search/apportion.h"
#include "synth/search/forest_plan.h"

namespace weft::synth {
namespace {

using plan::Collective;

TreeFlow flowOf(Collective c) {
  switch (c) {
    case Collective::kReduce:
    case Collective::kReduceScatter:
      return TreeFlow::kUp;
    case Collective::kAllReduce:
      return TreeFlow::kBoth;
    default:
      return TreeFlow::kDown;
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
      if (x > w + 1e-12)
        w = x, at = 1;
      else if (x > w - 1e-12)
        ++at;
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

// Links a tree loads per unit of rate (sparse: link, uses).
std::vector<std::vector<std::pair<int, double>>> treeLinkUses(const Fabric& f,
                                                              const PackResult& pack,
                                                              TreeFlow flow) {
  std::vector<std::vector<std::pair<int, double>>> uses(pack.trees.size());
  for (size_t t = 0; t < pack.trees.size(); ++t) {
    PackedTree one = pack.trees[t];
    one.weight = 1;
    const auto u = packLinkLoads(f, {one}, flow);
    for (size_t l = 0; l < u.size(); ++l)
      if (u[l] > 0) uses[t].push_back({static_cast<int>(l), u[l]});
  }
  return uses;
}

// Max-min fair rates (progressive filling) of `units[t]` identical jobs per tree, each loading
// tree t's links: the rate one job of tree t gets (0 where units[t] == 0). This is how the
// simulator (and the links) share bandwidth: per transfer, not per tree weight.
std::vector<double> maxMinRates(const Fabric& f,
                                const std::vector<std::vector<std::pair<int, double>>>& uses,
                                const std::vector<uint64_t>& units) {
  const size_t T = uses.size(), L = f.links.size();
  std::vector<double> rate(T, 0.0), left(L);
  for (size_t l = 0; l < L; ++l) left[l] = f.links[l].bw;
  std::vector<char> frozen(T, 0), full(L, 0);
  for (size_t t = 0; t < T; ++t) frozen[t] = units[t] == 0 || uses[t].empty();
  std::vector<double> demand(L);
  for (;;) {
    std::fill(demand.begin(), demand.end(), 0.0);
    bool any = false;
    for (size_t t = 0; t < T; ++t) {
      if (frozen[t]) continue;
      any = true;
      for (const auto& [l, x] : uses[t]) demand[l] += x * static_cast<double>(units[t]);
    }
    if (!any) break;
    double step = -1;
    for (size_t l = 0; l < L; ++l)
      if (demand[l] > 0 && (step < 0 || left[l] / demand[l] < step)) step = left[l] / demand[l];
    if (step < 0) break;
    for (size_t t = 0; t < T; ++t)
      if (!frozen[t]) rate[t] += step;
    for (size_t l = 0; l < L; ++l) {
      if (demand[l] <= 0) continue;
      left[l] -= step * demand[l];
      if (left[l] <= 1e-9 * f.links[l].bw) full[l] = 1;
    }
    for (size_t t = 0; t < T; ++t)
      if (!frozen[t])
        for (const auto& [l, x] : uses[t])
          if (full[l]) frozen[t] = 1;
  }
  return rate;
}

// Per root: the summed max-min rate of its jobs.
std::vector<double> rootRates(const PackResult& pack, int n, const std::vector<uint64_t>& units,
                              const std::vector<double>& rate) {
  std::vector<double> out(n, 0.0);
  for (size_t t = 0; t < pack.trees.size(); ++t)
    out[pack.trees[t].root] += static_cast<double>(units[t]) * rate[t];
  return out;
}

// Leximin order on the roots' rates (ascending, with a relative tolerance).
bool fairer(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = 1e-9 * std::max(a[i], b[i]);
    if (a[i] > b[i] + tol) return true;
    if (a[i] < b[i] - tol) return false;
  }
  return false;
}

struct FineJob {
  size_t tree = 0;
  uint64_t count = 0;
};
using FineJobs = std::vector<std::vector<FineJob>>;  // per root

// Fair-share jobs: the links share bandwidth per transfer, so every job of every tree gets its
// max-min fair rate whatever the tree's LP weight. The job counts per tree start from the
// weights (about unitsPerRoot per root) and move one job at a time (add, drop, or move within a
// root) while that raises the roots' fair rates in leximin order; each root's chunks then go to
// its jobs in proportion to their fair rates. *rateOut: the slowest root's fair rate.
FineJobs fineJobs(const Fabric& f, const PackResult& pack, TreeFlow flow, const PackPlanOptions& o,
                  double* rateOut) {
  const int n = f.nranks;
  const size_t T = pack.trees.size();
  const uint64_t C = o.fineChunksPerRank;
  const auto uses = treeLinkUses(f, pack, flow);
  std::vector<uint64_t> units = shares(pack, n, o.unitsPerRoot);
  const uint64_t maxJobs = o.maxUnitsPerRoot * static_cast<uint64_t>(n);
  auto evaluate = [&](const std::vector<uint64_t>& u) {
    return rootRates(pack, n, u, maxMinRates(f, uses, u));
  };
  std::vector<double> best = evaluate(units);
  std::vector<uint64_t> perRootUnits(n, 0);
  uint64_t total = 0;
  for (size_t t = 0; t < T; ++t) perRootUnits[pack.trees[t].root] += units[t], total += units[t];
  for (int iter = 0; iter < o.unitMoves; ++iter) {
    std::vector<uint64_t> bestUnits;
    std::vector<double> bestRates = best;
    auto tryUnits = [&](const std::vector<uint64_t>& u) {
      const auto r = evaluate(u);
      if (fairer(r, bestRates)) bestRates = r, bestUnits = u;
    };
    for (size_t a = 0; a < T; ++a) {
      const int r = pack.trees[a].root;
      std::vector<uint64_t> u = units;
      if (total < maxJobs && perRootUnits[r] < o.maxUnitsPerRoot) {
        ++u[a];
        tryUnits(u);
        --u[a];
      }
      if (units[a] == 0) continue;
      if (perRootUnits[r] > 1) {
        --u[a];
        tryUnits(u);
        ++u[a];
      }
      for (size_t b = 0; b < T; ++b) {
        if (b == a || pack.trees[b].root != r) continue;
        --u[a], ++u[b];
        tryUnits(u);
        ++u[a], --u[b];
      }
    }
    if (bestUnits.empty()) break;
    units = std::move(bestUnits);
    best = std::move(bestRates);
    std::fill(perRootUnits.begin(), perRootUnits.end(), 0);
    total = 0;
    for (size_t t = 0; t < T; ++t) perRootUnits[pack.trees[t].root] += units[t], total += units[t];
  }
  const std::vector<double> rate = maxMinRates(f, uses, units);
  *rateOut = *std::min_element(best.begin(), best.end());
  FineJobs out(n);
  for (int r = 0; r < n; ++r) {
    // This root's jobs, each weighted by its fair rate.
    std::vector<double> w;
    std::vector<size_t> tree;
    for (size_t t = 0; t < T; ++t)
      if (pack.trees[t].root == r)
        for (uint64_t i = 0; i < units[t]; ++i) w.push_back(rate[t]), tree.push_back(t);
    if (w.empty()) continue;
    const auto s = apportion(w, C);
    for (size_t k = 0; k < s.size(); ++k)
      if (s[k] > 0) out[r].push_back({tree[k], s[k]});
  }
  return out;
}

// The TreeJobs of `fine`: each root's jobs one after another over its C chunks.
std::vector<TreeJob> treeJobs(const PackResult& pack, const FineJobs& fine, uint64_t C,
                              bool perRootData, uint64_t steadyPieces) {
  std::vector<TreeJob> jobs;
  for (size_t r = 0; r < fine.size(); ++r) {
    uint64_t at = perRootData ? r * C : 0;
    for (const FineJob& fj : fine[r]) {
      TreeJob j;
      j.parent = pack.trees[fj.tree].parent;
      j.first = at;
      j.count = fj.count;
      j.pieceSizes = rampedPieces(fj.count, steadyPieces, true);
      at += fj.count;
      jobs.push_back(std::move(j));
    }
  }
  return jobs;
}

// Each tree's chunks of fineChunksPerRank in proportion to its LP weight, improved where the
// rounding loses rate; *rateOut: the rounded packing's rate by bottleneck arithmetic.
std::vector<uint64_t> treeChunks(const Fabric& f, const PackResult& pack, TreeFlow flow,
                                 const PackPlanOptions& o, double* rateOut) {
  const uint64_t C = o.fineChunksPerRank;
  std::vector<uint64_t> share = shares(pack, f.nranks, C);
  if (roundedRate(f, pack, flow, share, C) < o.minEfficiency * pack.rate)
    share = improveShares(f, pack, flow, std::move(share));
  *rateOut = roundedRate(f, pack, flow, share, C);
  return share;
}

// Each tree's chunks in proportion to its LP weight (the packing's rate by bottleneck
// arithmetic), cut into about unitsPerRoot x weight jobs per root.
FineJobs weightJobs(const Fabric& f, const PackResult& pack, TreeFlow flow,
                    const PackPlanOptions& o, double* rateOut) {
  const int n = f.nranks;
  const std::vector<uint64_t> share = treeChunks(f, pack, flow, o, rateOut);
  const std::vector<uint64_t> units = shares(pack, n, o.unitsPerRoot);
  FineJobs out(n);
  for (size_t t = 0; t < pack.trees.size(); ++t) {
    if (share[t] == 0) continue;
    const uint64_t k = std::clamp<uint64_t>(units[t], 1, share[t]);
    for (uint64_t i = 0; i < k; ++i)
      out[pack.trees[t].root].push_back({t, share[t] * (i + 1) / k - share[t] * i / k});
  }
  return out;
}

// One job per tree, its chunks in proportion to the tree's LP weight (rounded as weightJobs).
// With lane shares (plan::Lane::share = a job's chunks) the links share bandwidth per job in
// proportion to its data, so one job per tree suffices and its jobs finish together.
FineJobs perTreeJobs(const Fabric& f, const PackResult& pack, TreeFlow flow,
                     const PackPlanOptions& o, double* rateOut) {
  const std::vector<uint64_t> share = treeChunks(f, pack, flow, o, rateOut);
  FineJobs out(f.nranks);
  for (size_t t = 0; t < pack.trees.size(); ++t)
    if (share[t] > 0) out[pack.trees[t].root].push_back({t, share[t]});
  return out;
}

// Jobs of equal data: U jobs per root spread over its trees like chunks (the fewest U from
// unitsPerRoot to maxUnitsPerRoot whose rounding keeps minEfficiency of the rate, else the best),
// so every job needs the same fair share.
FineJobs equalJobs(const Fabric& f, const PackResult& pack, TreeFlow flow,
                   const PackPlanOptions& o) {
  const int n = f.nranks;
  std::vector<uint64_t> bestShares;
  double bestRate = -1;
  for (uint64_t U = std::max<uint64_t>(1, o.unitsPerRoot); U <= o.maxUnitsPerRoot; ++U) {
    std::vector<uint64_t> sh = shares(pack, n, U);
    double rate = roundedRate(f, pack, flow, sh, U);
    if (rate < o.minEfficiency * pack.rate) {
      std::vector<uint64_t> better = improveShares(f, pack, flow, sh);
      const double r = roundedRate(f, pack, flow, better, U);
      if (r > rate) rate = r, sh = std::move(better);
    }
    if (rate > bestRate * (1 + 1e-9)) bestRate = rate, bestShares = sh;
    if (rate >= o.minEfficiency * pack.rate) break;
  }
  FineJobs out(n);
  const uint64_t C = o.fineChunksPerRank;
  for (size_t t = 0; t < pack.trees.size(); ++t)
    for (uint64_t i = 0; i < bestShares[t]; ++i) out[pack.trees[t].root].push_back({t, 0});
  for (int r = 0; r < n; ++r) {
    const uint64_t k = out[r].size();
    for (uint64_t i = 0; i < k; ++i) out[r][i].count = C * (i + 1) / k - C * i / k;
    std::erase_if(out[r], [](const FineJob& j) { return j.count == 0; });
  }
  return out;
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

namespace {

// The depth prices raced beside the packing's own: shallowTrade and ten times it (which optimal
// vertex the LP lands on moves the result by up to 0.5%).
std::vector<double> shallowTrades(const PackPlanOptions& o) {
  std::vector<double> out;
  for (double t : {o.shallowTrade, 10 * o.shallowTrade})
    if (t > 0 && t != o.pack.depthTrade) out.push_back(t);
  return out;
}

// The jobs of one packing (chunk ranges per root for per-root collectives), before forestPlan.
struct JobSet {
  PackResult pack;
  std::vector<TreeJob> jobs;
  uint64_t chunksPerRoot = 0;
  double rate = 0;
};

// Finish time of every job (its last lane) in `sim`.
std::vector<double> jobFinishUs(const SimResult& sim, const std::vector<std::vector<int>>& laneJobs,
                                size_t jobs) {
  std::vector<double> out(jobs, 0.0);
  for (size_t r = 0; r < laneJobs.size(); ++r)
    for (size_t l = 0; l < laneJobs[r].size(); ++l)
      if (laneJobs[r][l] >= 0)
        out[laneJobs[r][l]] = std::max(out[laneJobs[r][l]], sim.laneFinishUs[r][l]);
  return out;
}

// Balancing by simulation: every root's chunks go to its jobs in proportion to the rate each
// job reached in the previous simulation at `bytes` (chunks / finish time), so the jobs that
// finished early take more; `rounds` times from `sim` (the run of treeJobs(fine)), keeping the
// fastest. Returns the jobs of the fastest round and sets *us to its time (the jobs of `fine`
// and sim.timeUs where no round beats them).
std::vector<TreeJob> balanceJobs(Collective coll, const Fabric& f, int root, const PackResult& pack,
                                 FineJobs fine, uint64_t C, uint64_t steady, uint64_t bytes,
                                 int rounds, SimResult sim, std::vector<std::vector<int>> laneJobs,
                                 double* us) {
  const int n = f.nranks;
  const bool pr = perRoot(coll);
  const uint64_t total = pr ? C * n : C;
  std::vector<TreeJob> best = treeJobs(pack, fine, C, pr, steady);
  *us = sim.timeUs;
  size_t jobCount = best.size();
  for (int round = 0; round < rounds; ++round) {
    const std::vector<double> finish = jobFinishUs(sim, laneJobs, jobCount);
    size_t k = 0;  // treeJobs emits fine[r]'s jobs in order, roots ascending
    for (auto& rootJobs : fine) {
      std::vector<double> w;
      for (const FineJob& fj : rootJobs) {
        const double t = finish[k++];
        w.push_back(t > 0 ? static_cast<double>(fj.count) / t : static_cast<double>(fj.count));
      }
      if (w.empty()) continue;
      const auto counts = apportion(w, C);
      for (size_t i = 0; i < rootJobs.size(); ++i) rootJobs[i].count = counts[i];
      std::erase_if(rootJobs, [](const FineJob& j) { return j.count == 0; });
    }
    std::vector<TreeJob> jobs = treeJobs(pack, fine, C, pr, steady);
    jobCount = jobs.size();
    laneJobs.clear();
    sim = simulate(forestPlan(coll, n, root, total, jobs, "candidate", &laneJobs), bytes, f);
    if (sim.timeUs < *us) *us = sim.timeUs, best = std::move(jobs);
  }
  return best;
}

JobSet jobSet(Collective coll, const Fabric& f, int root, const PackPlanOptions& o,
              bool choose = true) {
  JobSet js;
  js.pack = packFor(coll, f, root, o.pack);
  const TreeFlow flow = flowOf(coll);
  if (fineNeeded(js.pack)) {
    js.chunksPerRoot = o.fineChunksPerRank;
    const uint64_t C = perRoot(coll) ? js.chunksPerRoot * f.nranks : js.chunksPerRoot;
    js.jobs = treeJobs(js.pack, perTreeJobs(f, js.pack, flow, o, &js.rate), js.chunksPerRoot,
                       perRoot(coll), o.treeSteadyPieces);
    if (o.chooseBytes == 0 || !choose) return js;
    // The packing for the rate alone and the shallow ones (depthTrade shallowTrade and ten
    // times it: which optimal vertex the LP lands on moves the result by up to 0.5%), per-tree
    // jobs at twice treeSteadyPieces; the fastest then with twice as many pieces while that
    // gains, else with treeSteadyPieces.
    double bestUs = -1;
    uint64_t bestSteady = 2 * o.treeSteadyPieces;
    SimResult bestSim;
    std::vector<std::vector<int>> bestLanes;
    FineJobs perTree;
    auto tryJobs = [&](const PackResult& pack, const FineJobs& fine, double rate, uint64_t steady) {
      auto jobs = treeJobs(pack, fine, js.chunksPerRoot, perRoot(coll), steady);
      std::vector<std::vector<int>> lanes;
      SimResult sim = simulate(forestPlan(coll, f.nranks, root, C, jobs, "candidate", &lanes),
                               o.chooseBytes, f);
      if (bestUs >= 0 && sim.timeUs >= bestUs) return false;
      bestUs = sim.timeUs, bestSteady = steady, js.jobs = std::move(jobs);
      bestSim = std::move(sim), bestLanes = std::move(lanes);
      if (&pack != &js.pack) js.pack = pack;
      if (&fine != &perTree) perTree = fine;
      js.rate = rate;
      return true;
    };
    {
      double rate = 0;
      const FineJobs plain = perTreeJobs(f, js.pack, flow, o, &rate);
      tryJobs(js.pack, plain, rate, 2 * o.treeSteadyPieces);
    }
    for (double trade : shallowTrades(o)) {
      PackOptions po = o.pack;
      po.depthTrade = trade;
      const PackResult shallow = packFor(coll, f, root, po);
      if (!fineNeeded(shallow)) continue;
      double rate = 0;
      const FineJobs fine = perTreeJobs(f, shallow, flow, o, &rate);
      tryJobs(shallow, fine, rate, 2 * o.treeSteadyPieces);
    }
    const FineJobs chosen = perTree;
    uint64_t steady = 4 * o.treeSteadyPieces;
    if (!tryJobs(js.pack, chosen, js.rate, steady))
      tryJobs(js.pack, chosen, js.rate, o.treeSteadyPieces);
    else
      while (steady < 8 * o.treeSteadyPieces && tryJobs(js.pack, chosen, js.rate, 2 * steady))
        steady *= 2;
    if (o.balanceRounds > 0)
      js.jobs =
          balanceJobs(coll, f, root, js.pack, perTree, js.chunksPerRoot, bestSteady, o.chooseBytes,
                      o.balanceRounds, std::move(bestSim), std::move(bestLanes), &bestUs);
    if (o.oldLayouts) {
      double rate = 0;
      const std::vector<FineJobs> candidates = {weightJobs(f, js.pack, flow, o, &rate),
                                                fineJobs(f, js.pack, flow, o, &rate),
                                                equalJobs(f, js.pack, flow, o)};
      for (const FineJobs& fine : candidates) {
        auto jobs = treeJobs(js.pack, fine, js.chunksPerRoot, perRoot(coll), o.steadyPieces);
        const double us =
            simulate(forestPlan(coll, f.nranks, root, C, jobs, "candidate"), o.chooseBytes, f)
                .timeUs;
        if (us < bestUs) bestUs = us, js.jobs = std::move(jobs);
      }
    }
  } else {
    js.chunksPerRoot = evenJobs(f, js.pack, flow, o, perRoot(coll), &js.rate, &js.jobs);
  }
  return js;
}

// `js` with every chunk cut into `k` (the same pieces, k times the chunks).
void refine(JobSet& js, uint64_t k) {
  if (k == 1) return;
  for (TreeJob& j : js.jobs) {
    if (j.pieceSizes.empty() && j.pieces == 0) j.pieces = j.count;
    j.first *= k;
    j.count *= k;
    for (uint64_t& m : j.pieceSizes) m *= k;
    for (auto& [a, m] : j.ranges) a *= k, m *= k;
  }
  js.chunksPerRoot *= k;
}

// Each root's jobs (contiguous ranges of its block of C chunks) re-laid so that they advance
// through the block together: the block is cut into rounds (ramped: 1, 2, 4 ... chunks, about
// `steady` large rounds, then back down), and every job carries, in every round, its share of
// the round in proportion to its chunk count (cumulatively rounded, so the counts stay exact).
// The reduce-scatter and allgather of an allreduce then finish a round's chunks at about the
// same time, so a broadcast never waits for a reduction that its tree's order put last.
std::vector<TreeJob> roundJobs(const std::vector<TreeJob>& jobs, int n, uint64_t C,
                               uint64_t steady) {
  const std::vector<uint64_t> rounds = rampedPieces(C, steady);
  std::vector<TreeJob> out;
  for (int r = 0; r < n; ++r) {
    std::vector<const TreeJob*> mine;
    for (const TreeJob& j : jobs)
      if (treeRoot(j.parent) == r) mine.push_back(&j);
    std::vector<uint64_t> before(mine.size(), 0);
    std::vector<TreeJob> made(mine.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      made[i].parent = mine[i]->parent;
      made[i].count = mine[i]->count;
    }
    uint64_t at = static_cast<uint64_t>(r) * C, done = 0;
    for (uint64_t size : rounds) {
      done += size;
      for (size_t i = 0; i < mine.size(); ++i) {
        const uint64_t upto =
            static_cast<uint64_t>(static_cast<unsigned __int128>(mine[i]->count) * done / C);
        if (upto > before[i]) made[i].ranges.push_back({at, upto - before[i]});
        at += upto - before[i];
        before[i] = upto;
      }
    }
    for (TreeJob& j : made)
      if (!j.ranges.empty()) j.first = j.ranges.front().first, out.push_back(std::move(j));
  }
  return out;
}

PackedPlan treesAllReduce(const Fabric& f, const PackPlanOptions& o) {
  PackedPlan out;
  JobSet js = jobSet(Collective::kAllReduce, f, 0, o, false);
  out.pack = std::move(js.pack);
  out.chunksPerRoot = js.chunksPerRoot;
  out.roundedRate = js.rate;
  out.plan = forestPlan(Collective::kAllReduce, f.nranks, 0, js.chunksPerRoot * f.nranks, js.jobs,
                        "pack-allreduce");
  return out;
}

// `lpRate`: the rate per root of the two packings together (before rounding).
PackedPlan rsAgAllReduce(const Fabric& f, const PackPlanOptions& o, double* lpRate = nullptr) {
  PackedPlan out;
  JobSet rs = jobSet(Collective::kReduceScatter, f, 0, o, false);
  JobSet ag = jobSet(Collective::kAllGather, f, 0, o, false);
  const uint64_t common = std::lcm(rs.chunksPerRoot, ag.chunksPerRoot);
  refine(rs, common / rs.chunksPerRoot);
  refine(ag, common / ag.chunksPerRoot);
  if (lpRate) *lpRate = 1 / (1 / rs.pack.rate + 1 / ag.pack.rate);
  out.pack = std::move(ag.pack);
  out.chunksPerRoot = common;
  out.roundedRate = rs.rate > 0 && ag.rate > 0 ? 1 / (1 / rs.rate + 1 / ag.rate) : 0;
  if (fineNeeded(rs.pack) || fineNeeded(ag.pack)) {
    rs.jobs = roundJobs(rs.jobs, f.nranks, common, o.treeSteadyPieces);
    ag.jobs = roundJobs(ag.jobs, f.nranks, common, o.treeSteadyPieces);
  }
  out.plan =
      forestPlanAllReduce(f.nranks, common * f.nranks, rs.jobs, ag.jobs, "pack-allreduce-rsag");
  return out;
}

}  // namespace

PackedPlan packPlanDetailed(Collective coll, const Fabric& f, int root,
                            const PackPlanOptions& options) {
  PackPlanOptions o = options;
  if (o.chooseBytes > 0 && o.chooseChunksPerRank > 0) o.fineChunksPerRank = o.chooseChunksPerRank;
  if (o.maxChunksPerRank < 1 || !(o.minEfficiency > 0 && o.minEfficiency <= 1))
    throw Error(Status::kInvalidArgument,
                "pack plan: maxChunksPerRank must be >= 1 and minEfficiency in (0, 1]");
  const int n = f.nranks;
  if (n == 1) {  // one rank: a copy (the tree is the root alone)
    PackedPlan out;
    out.pack = packFor(coll, f, root, o.pack);
    out.chunksPerRoot = 1;
    out.roundedRate = out.pack.rate;
    out.plan = forestPlan(coll, 1, root, 1, {TreeJob{{-1}, 0, 1, 0, {}, {}}},
                          std::string("pack-") + plan::collectiveName(coll));
    return out;
  }
  if (coll == Collective::kAllReduce) {
    if (o.allReduce == AllReduceShape::kTrees) return treesAllReduce(f, o);
    if (o.allReduce == AllReduceShape::kRsAg) return rsAgAllReduce(f, o);
    if (o.chooseBytes == 0) {  // the packings' rates; ties go to RS + AG (one direction per edge)
      PackedPlan trees = treesAllReduce(f, o);
      double rsagRate = 0;
      PackedPlan rsag = rsAgAllReduce(f, o, &rsagRate);
      return rsagRate >= trees.pack.rate * (1 - 1e-6) ? std::move(rsag) : std::move(trees);
    }
    // Races in the simulator as coarser plans (a quarter of the chunks, at a quarter of the
    // size, which keeps two-node synthesis within tens of seconds): the trees over the packing
    // for the rate alone and over the shallow one, then reduce-scatter + allgather over the
    // faster packing, then the faster shape with twice the steady pieces; the winner is built
    // at full resolution with twice its steady pieces. At 1 GiB on dgx-h100-x2 the shallow
    // trees win (0.988 of the bound at 256 steady pieces, 0.981 at 128; the deep ones 0.939);
    // half the steady pieces in the race picked RS + AG there (0.974).
    PackPlanOptions coarse = o;
    coarse.fineChunksPerRank = std::max<uint64_t>(64, o.fineChunksPerRank / 4);
    const uint64_t raceBytes = std::max<uint64_t>(1, o.chooseBytes / 4);
    auto build = [&](bool trees, const PackPlanOptions& po) {
      return trees ? treesAllReduce(f, po) : rsAgAllReduce(f, po);
    };
    auto race = [&](bool trees, const PackPlanOptions& po) {
      return simulate(build(trees, po).plan, raceBytes, f).timeUs;
    };
    double bestUs = race(true, coarse);
    const PackPlanOptions plain = coarse;
    for (double trade : shallowTrades(o)) {
      PackPlanOptions shallow = plain;
      shallow.pack.depthTrade = trade;
      const double us = race(true, shallow);
      if (us < bestUs) bestUs = us, coarse = shallow;
    }
    const double rsag = race(false, coarse);
    const bool trees = bestUs <= rsag;
    bestUs = std::min(bestUs, rsag);
    PackPlanOptions finer = coarse;
    finer.treeSteadyPieces = 2 * coarse.treeSteadyPieces;
    const bool more = race(trees, finer) < bestUs;
    PackPlanOptions full = o;
    full.pack.depthTrade = coarse.pack.depthTrade;
    full.treeSteadyPieces = (more ? 4 : 2) * o.treeSteadyPieces;
    return build(trees, full);
  }
  PackedPlan out;
  JobSet js = jobSet(coll, f, root, o);
  out.pack = std::move(js.pack);
  out.chunksPerRoot = js.chunksPerRoot;
  out.roundedRate = js.rate;
  const uint64_t C = perRoot(coll) ? js.chunksPerRoot * n : js.chunksPerRoot;
  out.plan =
      forestPlan(coll, n, root, C, js.jobs, std::string("pack-") + plan::collectiveName(coll));
  return out;
}

plan::ChunkPlan packPlan(Collective coll, const Fabric& f, int root, const PackPlanOptions& o) {
  return packPlanDetailed(coll, f, root, o).plan;
}

}  // namespace weft::synth
