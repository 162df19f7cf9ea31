#include "synth/pack/pack_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "src/common/error.h"
#include "synth/model/simulator.h"
#include "synth/pack/job_layouts.h"
#include "synth/search/apportion.h"
#include "synth/search/forest_plan.h"

namespace weft::synth {
namespace {

using layouts::equalJobs;
using layouts::evenJobs;
using layouts::FineJob;
using layouts::FineJobs;
using layouts::fineJobs;
using layouts::perTreeJobs;
using layouts::treeJobs;
using layouts::weightJobs;
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
    // at full resolution with twice its steady pieces. The race runs at twice the steady
    // pieces because with fewer it ranks the shapes differently from the full-resolution plan
    // (the simulated ratios behind this: perf/README.md, "The packed allreduce's race").
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
