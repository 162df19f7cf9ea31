// Shared by the exact-synthesis tests: the DGX-1 rank graph from the golden topology, and an
// independent replay of a schedule against SCCL's rules.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "src/topo/xml_reader.h"
#include "synth/model/fabric.h"
#include "synth/solver/solver.h"

namespace weft::synth::solver::testing {

inline topo::Topology golden(const std::string& name) {
  return topo::readTopologyFile(std::string(WEFT_SOURCE_DIR) + "/tests/golden/topologies/" + name);
}

inline RankGraph dgx1() {
  return rankGraphFromFabric(fabricFromTopology(golden("dgx1-v100.xml")), 0, "dgx1");
}

// DGX-1 allgather instances, solved once per test binary (several tests lower the same points).
inline const SolveResult& dgx1AllGather(int steps, int rounds, int chunks) {
  static std::map<std::tuple<int, int, int>, SolveResult> solved;
  auto key = std::make_tuple(steps, rounds, chunks);
  auto it = solved.find(key);
  if (it == solved.end())
    it = solved
             .emplace(key, solveInstance(dgx1(), {plan::Collective::kAllGather, 0}, steps, rounds,
                                         chunks, 60))
             .first;
  return it->second;
}

#define DGX1_OR_SKIP(result, S, R, C)                          \
  const SolveResult& result = testing::dgx1AllGather(S, R, C); \
  if (result.status == SolveStatus::kUnknown)                  \
  GTEST_SKIP() << "Z3 gave up (" << result.reason << ") after " << result.seconds << " s"

// Solves and skips the test when Z3 gives up (a slow machine), so a timeout is never a failure.
#define SOLVE_OR_SKIP(result, ...)                 \
  SolveResult result = solveInstance(__VA_ARGS__); \
  if (result.status == SolveStatus::kUnknown)      \
  GTEST_SKIP() << "Z3 gave up (" << result.reason << ") after " << result.seconds << " s"

// Replays `s` step by step: a rank sends only chunks it held before the step, a link of u units
// carries at most u * r_s chunks in step s, the rounds sum to R, and every destination ends up
// with every chunk it needs. Returns "" or the first violation.
inline std::string replay(const RankGraph& g, const Schedule& s) {
  const Instance& in = s.instance;
  if (static_cast<int>(s.roundsPerStep.size()) != s.steps) return "wrong number of r_s";
  int sum = 0;
  for (int r : s.roundsPerStep) {
    if (r < 1) return "a step has no round";
    sum += r;
  }
  if (sum != s.rounds) return "rounds do not sum to R";
  const int n = in.nranks, k = static_cast<int>(in.chunkInfo.size());
  std::vector<std::vector<char>> has(k, std::vector<char>(n, 0));
  for (int c = 0; c < k; ++c) has[c][in.chunkInfo[c].source] = 1;
  for (int step = 0; step < s.steps; ++step) {
    std::vector<std::vector<int>> load(n, std::vector<int>(n, 0));
    auto next = has;
    for (const ChunkSend& m : s.sends) {
      if (m.step != step) continue;
      if (g.capacity[m.from][m.to] == 0) return "send over a missing link";
      if (!has[m.chunk][m.from])
        return "rank " + std::to_string(m.from) + " sends chunk " + std::to_string(m.chunk) +
               " it does not hold in step " + std::to_string(step);
      if (++load[m.from][m.to] > g.capacity[m.from][m.to] * s.roundsPerStep[step])
        return "link " + std::to_string(m.from) + "->" + std::to_string(m.to) +
               " overloaded in step " + std::to_string(step);
      next[m.chunk][m.to] = 1;
    }
    has = next;
  }
  for (int c = 0; c < k; ++c)
    for (int d : in.chunkInfo[c].destinations)
      if (!has[c][d])
        return "chunk " + std::to_string(c) + " never reaches rank " + std::to_string(d);
  return "";
}

}  // namespace weft::synth::solver::testing
