// Exact synthesis in SCCL's (steps, rounds, chunks) formulation, solved with Z3.
//
// An algorithm runs in S synchronous steps. Step s lasts r_s >= 1 rounds (sum r_s = R), and a
// link of u units carries at most u * r_s chunks during it. A rank may forward a chunk in a step
// only if it held the chunk before that step. With C chunks per rank's share the cost is
// S * alpha + (R / C) * L * beta (L: bytes of a rank's share), so (S, R/C) pairs trade latency
// for bandwidth; paretoFrontier() walks them the way SCCL's Pareto-Synthesize does.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "synth/solver/instance.h"
#include "synth/solver/rank_graph.h"

namespace weft::synth::solver {

// One chunk crossing one link in one step (steps count from 0).
struct ChunkSend {
  int chunk = 0;  // index into Instance::chunkInfo
  int from = 0, to = 0;
  int step = 0;
};

struct Schedule {
  Instance instance;
  int steps = 0, rounds = 0;
  std::vector<int> roundsPerStep;  // r_s, summing to `rounds`
  // Sorted by (step, from, to, chunk); a chunk arrives at a rank at most once.
  std::vector<ChunkSend> sends;
  std::string describe() const;  // one line per step
};

enum class SolveStatus { kSat, kUnsat, kUnknown };
const char* solveStatusName(SolveStatus s);  // "sat", "unsat", "unknown"

struct SolveResult {
  SolveStatus status = SolveStatus::kUnknown;
  std::optional<Schedule> schedule;  // set when sat
  double seconds = 0;                // wall time of the solve
  bool symmetric = false;            // the schedule came from the symmetric search
  std::string reason;                // Z3's reason for unknown (a timeout, ...)
};

// Rank permutations that map the graph onto itself (link units included), the identity first.
// Stops after `limit` of them.
std::vector<std::vector<int>> automorphisms(const RankGraph& graph, size_t limit = 4096);

struct SolveOptions {
  double timeoutSec = 0;  // for the whole call; <= 0: no limit (past it the result is kUnknown)
  // Automorphisms the schedule must be invariant under (the group they generate, up to 64
  // elements, is used): a chunk's moves, mapped by one of them, are the moves of the mapped
  // chunk. This shrinks the search; it can miss schedules, so only its sat answers are final.
  std::vector<std::vector<int>> symmetry;
  std::vector<int> roundsPerStep;  // fixes r_s; empty: the solver picks them
  // Orders the move vectors of interchangeable chunks (same source and destinations), keeping one
  // schedule of each class that swaps them. Sound; whether it speeds Z3 up depends on the case.
  bool breakChunkSymmetry = false;
};

// Solves one (steps, rounds, chunks) instance exactly as `options` say.
SolveResult solveEncoding(const RankGraph& graph, const CollectiveSpec& spec, int steps, int rounds,
                          int chunks, const SolveOptions& options);

// Solves one (steps, rounds, chunks) instance: a search invariant under the graph's automorphisms
// (up to 64; fast where a symmetric schedule exists) and the full search, which alone decides
// unsat, run side by side (two threads) until one answers. timeoutSec <= 0 means no limit; past
// it the result is kUnknown. Throws weft::Error(kInvalidArgument) for steps < 1, rounds < steps,
// chunks < 1 or an unsupported collective.
SolveResult solveInstance(const RankGraph& graph, const CollectiveSpec& spec, int steps, int rounds,
                          int chunks, double timeoutSec = 0);

// A rational bound.
struct Ratio {
  int64_t num = 0, den = 1;
  double value() const { return static_cast<double>(num) / den; }
  std::string text() const;  // "7/6"
};

// Fewest steps any algorithm needs: the largest hop distance from a chunk's source to one of its
// destinations (the diameter for allgather).
int stepsLowerBound(const RankGraph& graph, const CollectiveSpec& spec);

// Fewest rounds per chunk (R / C) any algorithm needs: over every set X of ranks (all subsets up
// to 16 ranks, single ranks beyond), the chunks that must enter X divided by the units entering
// X. DGX-1 allgather: 7/6 (a GPU receives 7 shares over 6 NVLinks).
Ratio roundsPerChunkLowerBound(const RankGraph& graph, const CollectiveSpec& spec);

struct ParetoOptions {
  int maxChunks = 8;       // largest C tried
  int maxSteps = 0;        // largest S tried; 0 = step lower bound + 2
  int maxExtraRounds = 6;  // R goes up to S + maxExtraRounds
  double timeoutSec = 10;  // per instance; an instance past it counts as not solved
};

struct ParetoAttempt {
  int steps = 0, rounds = 0, chunks = 0;
  SolveStatus status = SolveStatus::kUnknown;
  double seconds = 0;
};

struct ParetoPoint {
  Schedule schedule;
  double seconds = 0;  // time the solver took for this point
};

struct ParetoResult {
  int stepsBound = 0;
  Ratio roundsPerChunkBound;
  std::vector<ParetoPoint> points;      // increasing steps, decreasing rounds per chunk
  std::vector<ParetoAttempt> attempts;  // every instance tried, in order
  bool bandwidthOptimal = false;        // the last point meets roundsPerChunkBound
};

// SCCL's Pareto-Synthesize: for S from the step lower bound up and R from S up, try C from the
// most R rounds allow (R/C at or above the rounds-per-chunk bound, C <= maxChunks) down while
// R/C beats the best ratio found so far; the first sat C is kept. Once a step count has a sat
// instance, it ends at the first R where every C tried was unsat (or unknown); before that it
// ends at an unknown. The walk ends when the bound is met. The best instance of each S is a
// point when it beats every smaller S.
ParetoResult paretoFrontier(const RankGraph& graph, const CollectiveSpec& spec,
                            const ParetoOptions& options = {});

}  // namespace weft::synth::solver
