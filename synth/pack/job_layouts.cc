#include "synth/pack/job_layouts.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "synth/search/apportion.h"

namespace weft::synth::layouts {
namespace {

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

}  // namespace

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

FineJobs perTreeJobs(const Fabric& f, const PackResult& pack, TreeFlow flow,
                     const PackPlanOptions& o, double* rateOut) {
  const std::vector<uint64_t> share = treeChunks(f, pack, flow, o, rateOut);
  FineJobs out(f.nranks);
  for (size_t t = 0; t < pack.trees.size(); ++t)
    if (share[t] > 0) out[pack.trees[t].root].push_back({t, share[t]});
  return out;
}

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

}  // namespace weft::synth::layouts
