// The lower bounds on steps and rounds per chunk, and SCCL's Pareto-Synthesize walk over
// (steps, rounds, chunks) instances solved by solveInstance (synth/solver/solver.h).
#include <algorithm>
#include <numeric>

#include "src/common/error.h"
#include "synth/solver/solver.h"

namespace weft::synth::solver {

std::string Ratio::text() const { return std::to_string(num) + "/" + std::to_string(den); }

int stepsLowerBound(const RankGraph& graph, const CollectiveSpec& spec) {
  const Instance in = makeInstance(spec, graph.nranks, 1);
  const auto hops = graph.hops();
  int bound = 0;
  for (const ChunkInfo& c : in.chunkInfo)
    for (int d : c.destinations) {
      if (hops[c.source][d] < 0)
        throw Error(Status::kInvalidArgument, "rank graph '" + graph.name + "': rank " +
                                                  std::to_string(d) + " cannot be reached from " +
                                                  std::to_string(c.source));
      bound = std::max(bound, hops[c.source][d]);
    }
  return bound;
}

Ratio roundsPerChunkLowerBound(const RankGraph& graph, const CollectiveSpec& spec) {
  const int n = graph.nranks;
  const Instance in = makeInstance(spec, n, 1);
  Ratio best{0, 1};
  auto consider = [&](uint32_t set) {
    auto inside = [&](int r) { return (set >> r) & 1u; };
    int64_t chunks = 0, units = 0;
    for (const ChunkInfo& c : in.chunkInfo) {
      if (inside(c.source)) continue;
      for (int d : c.destinations)
        if (inside(d)) {
          ++chunks;
          break;
        }
    }
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (!inside(a) && inside(b)) units += graph.capacity[a][b];
    if (chunks == 0) return;
    if (units == 0)
      throw Error(Status::kInvalidArgument,
                  "rank graph '" + graph.name + "': chunks cannot reach every destination");
    if (chunks * best.den > best.num * units) best = {chunks, units};
  };
  if (n <= 16) {
    for (uint32_t set = 1; set + 1 < (1u << n); ++set) consider(set);
  } else {
    // Single ranks only: more subsets would take too long.
    for (int r = 0; r < n; ++r) {
      // Sets beyond 32 ranks cannot be masks; the per-rank bound is computed directly.
      int64_t chunks = 0;
      for (const ChunkInfo& c : in.chunkInfo)
        if (c.source != r &&
            std::find(c.destinations.begin(), c.destinations.end(), r) != c.destinations.end())
          ++chunks;
      const int64_t units = graph.unitsIn(r);
      if (chunks == 0) continue;
      if (units == 0)
        throw Error(Status::kInvalidArgument, "rank graph '" + graph.name + "': rank " +
                                                  std::to_string(r) + " has no incoming link");
      if (chunks * best.den > best.num * units) best = {chunks, units};
    }
  }
  const int64_t g = std::gcd(best.num, best.den);
  if (g > 1) best = {best.num / g, best.den / g};
  return best;
}

ParetoResult paretoFrontier(const RankGraph& graph, const CollectiveSpec& spec,
                            const ParetoOptions& options) {
  ParetoResult result;
  result.stepsBound = stepsLowerBound(graph, spec);
  result.roundsPerChunkBound = roundsPerChunkLowerBound(graph, spec);
  const Ratio bound = result.roundsPerChunkBound;
  const int maxSteps = options.maxSteps > 0 ? options.maxSteps : result.stepsBound + 2;
  // Best rounds-per-chunk so far (rounds, chunks); none yet.
  int bestR = 0, bestC = 0;
  auto better = [&](int r, int c) { return bestC == 0 || int64_t{r} * bestC < int64_t{bestR} * c; };
  for (int S = result.stepsBound; S <= maxSteps && !result.bandwidthOptimal; ++S) {
    std::optional<ParetoPoint> bestHere;
    for (int R = S; R <= S + options.maxExtraRounds && !result.bandwidthOptimal; ++R) {
      // The most chunks R rounds can serve (R / C >= bound), then fewer while the ratio still
      // beats the best so far; the first sat C is the best this (S, R) can do.
      const int most = static_cast<int>(std::min<int64_t>(
          options.maxChunks, int64_t{R} * bound.den / std::max<int64_t>(1, bound.num)));
      bool solved = false, tried = false, gaveUp = false;
      for (int C = most; C >= 1 && better(R, C); --C) {
        tried = true;
        SolveResult res = solveInstance(graph, spec, S, R, C, options.timeoutSec);
        result.attempts.push_back({S, R, C, res.status, res.seconds});
        gaveUp |= res.status == SolveStatus::kUnknown;
        if (res.status != SolveStatus::kSat) continue;
        solved = true;
        bestR = R;
        bestC = C;
        bestHere = ParetoPoint{*res.schedule, res.seconds};
        result.bandwidthOptimal = int64_t{R} * bound.den == int64_t{C} * bound.num;
        break;
      }
      // Past the best ratio this step count reached (or where Z3 gives up), more rounds are not
      // tried; before its first sat instance, more rounds may still make one.
      if (tried && !solved && (bestHere || gaveUp)) break;
    }
    if (bestHere) result.points.push_back(std::move(*bestHere));
  }
  return result;
}
}  // namespace weft::synth::solver
