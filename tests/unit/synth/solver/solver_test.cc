// Exact synthesis: the rank graph, the lower bounds, the two DGX-1 allgather points SCCL found
// (and their unsat neighbours), small rings and triangles, the Pareto walk and bad input.
#include <gtest/gtest.h>

#include "src/common/error.h"
#include "tests/unit/synth/solver/solver_support.h"

namespace weft::synth::solver {
namespace {

using testing::dgx1;
using testing::replay;

const CollectiveSpec kAllGather{plan::Collective::kAllGather, 0};

TEST(ExactRankGraph, Dgx1FromTopologyHasSccLinkMultiplicities) {
  const RankGraph g = dgx1();
  // msccl-tools' dgx1(): double links 0-1 0-4 1-3 2-3 2-6 4-5 5-7 6-7, the rest single.
  const std::vector<std::vector<int>> expected = {
      {0, 2, 1, 1, 2, 0, 0, 0}, {2, 0, 1, 2, 0, 1, 0, 0}, {1, 1, 0, 2, 0, 0, 2, 0},
      {1, 2, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2, 1, 1}, {0, 1, 0, 0, 2, 0, 1, 2},
      {0, 0, 2, 0, 1, 1, 0, 2}, {0, 0, 0, 1, 1, 2, 2, 0}};
  EXPECT_EQ(g.capacity, expected) << g.describe();
  EXPECT_EQ(g.diameter(), 2);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(g.unitsIn(r), 6);
  EXPECT_EQ(g.links().size(), 32u);
  // The hybrid cube-mesh with its double links has four automorphisms.
  EXPECT_EQ(automorphisms(g).size(), 4u);
}

TEST(ExactRankGraph, FromFabricUsesOnlyDirectLinks) {
  const RankGraph g = rankGraphFromFabric(fullyConnectedFabric(4, 10.0));
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) EXPECT_EQ(g.capacity[a][b], a == b ? 0 : 1);
  // A GPU subset: ranks 0, 1, 3 of the DGX-1 (double link 1-3, single 0-3).
  FabricOptions o;
  o.gpus = {0, 1, 3};
  const RankGraph sub =
      rankGraphFromFabric(fabricFromTopology(testing::golden("dgx1-v100.xml"), o));
  EXPECT_EQ(sub.capacity, (std::vector<std::vector<int>>{{0, 2, 1}, {2, 0, 2}, {1, 2, 0}}));
}

TEST(ExactRankGraph, BadMatricesAreRejected) {
  EXPECT_THROW(rankGraphFromMatrix({{0, 1}, {1}}), Error);
  EXPECT_THROW(rankGraphFromMatrix({{1, 1}, {1, 0}}), Error);
  EXPECT_THROW(rankGraphFromMatrix({{0, -1}, {1, 0}}), Error);
  EXPECT_THROW(rankGraphFromMatrix({}), Error);
  // Disconnected: rank 2 is unreachable.
  const RankGraph g = rankGraphFromMatrix({{0, 1, 0}, {1, 0, 0}, {0, 0, 0}});
  EXPECT_THROW(g.diameter(), Error);
  EXPECT_THROW(stepsLowerBound(g, kAllGather), Error);
}

TEST(ExactBounds, Dgx1AllGatherNeedsTwoStepsAndSevenSixthsRoundsPerChunk) {
  const RankGraph g = dgx1();
  EXPECT_EQ(stepsLowerBound(g, kAllGather), 2);
  const Ratio rpc = roundsPerChunkLowerBound(g, kAllGather);
  EXPECT_EQ(rpc.num, 7);
  EXPECT_EQ(rpc.den, 6);
}

TEST(ExactBounds, RingsAndBroadcast) {
  // Unidirectional 4-ring: 3 steps, and each rank takes in 3 shares over one unit.
  const RankGraph ring =
      rankGraphFromMatrix({{0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}}, "ring4");
  EXPECT_EQ(stepsLowerBound(ring, kAllGather), 3);
  EXPECT_EQ(roundsPerChunkLowerBound(ring, kAllGather).text(), "3/1");
  // Broadcast from 0 on a path 0-1-2: two steps, one chunk per round through each cut.
  const RankGraph path = rankGraphFromMatrix({{0, 1, 0}, {1, 0, 1}, {0, 1, 0}}, "path3");
  const CollectiveSpec bcast{plan::Collective::kBroadcast, 0};
  EXPECT_EQ(stepsLowerBound(path, bcast), 2);
  EXPECT_EQ(roundsPerChunkLowerBound(path, bcast).text(), "1/1");
}

TEST(ExactDgx1AllGather, LatencyOptimalTwoStepsThreeRoundsTwoChunks) {
  const RankGraph g = dgx1();
  DGX1_OR_SKIP(r, 2, 3, 2);
  ASSERT_EQ(r.status, SolveStatus::kSat);
  ASSERT_TRUE(r.schedule);
  EXPECT_EQ(replay(g, *r.schedule), "") << r.schedule->describe();
  // 16 chunks, each reaching 7 ranks exactly once.
  EXPECT_EQ(r.schedule->sends.size(), 16u * 7u);
}

TEST(ExactDgx1AllGather, TwoStepsNeedThreeRoundsForTwoChunks) {
  DGX1_OR_SKIP(r, 2, 2, 2);
  EXPECT_EQ(r.status, SolveStatus::kUnsat);
}

TEST(ExactDgx1AllGather, TwoStepsCannotReachFourThirds) {
  // SCCL's log: (S=2, R=4, C=3) is unsat; only the full (non-symmetric) search decides it.
  DGX1_OR_SKIP(r, 2, 4, 3);
  EXPECT_EQ(r.status, SolveStatus::kUnsat);
  EXPECT_FALSE(r.symmetric);
}

TEST(ExactDgx1AllGather, BandwidthOptimalThreeStepsSevenRoundsSixChunks) {
  const RankGraph g = dgx1();
  DGX1_OR_SKIP(r, 3, 7, 6);
  ASSERT_EQ(r.status, SolveStatus::kSat);
  EXPECT_EQ(replay(g, *r.schedule), "") << r.schedule->describe();
  EXPECT_EQ(r.schedule->sends.size(), 48u * 7u);
  // At the bound every rank's six link units are busy in every round: 42 chunks in 7 rounds.
  for (int n = 0; n < 8; ++n) {
    int in = 0;
    for (const ChunkSend& m : r.schedule->sends) in += m.to == n;
    EXPECT_EQ(in, 42);
  }
}

TEST(ExactDgx1AllGather, SixRoundsCannotCarrySixChunks) {
  DGX1_OR_SKIP(r, 3, 6, 6);
  EXPECT_EQ(r.status, SolveStatus::kUnsat);
}

TEST(ExactDgx1AllGather, OneStepIsBelowTheDiameter) {
  DGX1_OR_SKIP(r, 1, 3, 1);
  EXPECT_EQ(r.status, SolveStatus::kUnsat);
}

TEST(ExactDgx1AllGather, ParetoFrontierIsSccLsTwoPoints) {
  ParetoOptions o;
  o.maxChunks = 6;
  o.timeoutSec = 30;
  const ParetoResult p = paretoFrontier(dgx1(), kAllGather, o);
  for (const ParetoAttempt& a : p.attempts)
    if (a.status == SolveStatus::kUnknown) GTEST_SKIP() << "Z3 gave up on an instance";
  EXPECT_EQ(p.stepsBound, 2);
  EXPECT_EQ(p.roundsPerChunkBound.text(), "7/6");
  ASSERT_EQ(p.points.size(), 2u);
  const Schedule& lat = p.points[0].schedule;
  const Schedule& bw = p.points[1].schedule;
  EXPECT_EQ((std::vector<int>{lat.steps, lat.rounds, lat.instance.chunks}),
            (std::vector<int>{2, 3, 2}));
  EXPECT_EQ((std::vector<int>{bw.steps, bw.rounds, bw.instance.chunks}),
            (std::vector<int>{3, 7, 6}));
  EXPECT_TRUE(p.bandwidthOptimal);
  // The walk stopped S=2 at its first unsat instance, (2, 4, 3).
  bool sawUnsat = false;
  for (const ParetoAttempt& a : p.attempts)
    if (a.steps == 2 && a.rounds == 4 && a.chunks == 3) sawUnsat = a.status == SolveStatus::kUnsat;
  EXPECT_TRUE(sawUnsat);
}

TEST(ExactSmallGraphs, ParetoWalkAddsRoundsUntilAStepCountWorks) {
  // DGX-1 GPUs 0-5: two steps and two rounds cannot serve even one chunk per share, three can.
  FabricOptions o;
  o.gpus = {0, 1, 2, 3, 4, 5};
  const RankGraph g = rankGraphFromFabric(fabricFromTopology(testing::golden("dgx1-v100.xml"), o));
  ParetoOptions po;
  po.maxSteps = 3;
  po.timeoutSec = 30;
  const ParetoResult p = paretoFrontier(g, kAllGather, po);
  for (const ParetoAttempt& a : p.attempts)
    if (a.status == SolveStatus::kUnknown) GTEST_SKIP() << "Z3 gave up on an instance";
  EXPECT_EQ(p.roundsPerChunkBound.text(), "5/3");
  ASSERT_FALSE(p.attempts.empty());
  EXPECT_EQ(p.attempts[0].status, SolveStatus::kUnsat);  // (2, 2, 1)
  ASSERT_EQ(p.points.size(), 2u);
  EXPECT_EQ((std::vector<int>{p.points[0].schedule.steps, p.points[0].schedule.rounds,
                              p.points[0].schedule.instance.chunks}),
            (std::vector<int>{2, 3, 1}));
  EXPECT_EQ((std::vector<int>{p.points[1].schedule.steps, p.points[1].schedule.rounds,
                              p.points[1].schedule.instance.chunks}),
            (std::vector<int>{3, 4, 2}));
  EXPECT_FALSE(p.bandwidthOptimal);
  for (const ParetoPoint& pt : p.points) EXPECT_EQ(replay(g, pt.schedule), "");
}

TEST(ExactSmallGraphs, TriangleAllGatherInOneStep) {
  // DGX-1 GPUs 0, 1, 2: 0-1 double, 0-2 and 1-2 single.
  const RankGraph g = rankGraphFromMatrix({{0, 2, 1}, {2, 0, 1}, {1, 1, 0}}, "triangle");
  EXPECT_EQ(roundsPerChunkLowerBound(g, kAllGather).text(), "1/1");
  SOLVE_OR_SKIP(r, g, kAllGather, 1, 1, 1, 30);
  ASSERT_EQ(r.status, SolveStatus::kSat);
  EXPECT_EQ(replay(g, *r.schedule), "");
  // Two chunks per share do not fit one round: rank 2 takes in 4 chunks over 2 units.
  SOLVE_OR_SKIP(r2, g, kAllGather, 1, 1, 2, 30);
  EXPECT_EQ(r2.status, SolveStatus::kUnsat);
}

TEST(ExactSmallGraphs, UnidirectionalRingNeedsThreeStepsOfOneRound) {
  const RankGraph ring =
      rankGraphFromMatrix({{0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}}, "ring4");
  SOLVE_OR_SKIP(r, ring, kAllGather, 3, 3, 1, 30);
  ASSERT_EQ(r.status, SolveStatus::kSat);
  EXPECT_EQ(replay(ring, *r.schedule), "");
  // Chunks only move forward, so each hop of a chunk is a send: 4 chunks x 3 hops.
  EXPECT_EQ(r.schedule->sends.size(), 12u);
  SOLVE_OR_SKIP(r2, ring, kAllGather, 2, 4, 1, 30);
  EXPECT_EQ(r2.status, SolveStatus::kUnsat);
  const ParetoResult p = paretoFrontier(ring, kAllGather);
  ASSERT_EQ(p.points.size(), 1u);
  EXPECT_EQ(p.points[0].schedule.rounds, 3);
  EXPECT_EQ(p.points[0].schedule.instance.chunks, 1);
  EXPECT_TRUE(p.bandwidthOptimal);
}

TEST(ExactSmallGraphs, AlltoallAndBroadcast) {
  // Bidirectional 4-ring: alltoall between opposite ranks needs a relay.
  const RankGraph ring =
      rankGraphFromMatrix({{0, 1, 0, 1}, {1, 0, 1, 0}, {0, 1, 0, 1}, {1, 0, 1, 0}}, "biring4");
  const CollectiveSpec a2a{plan::Collective::kAlltoAll, 0};
  EXPECT_EQ(stepsLowerBound(ring, a2a), 2);
  SOLVE_OR_SKIP(r, ring, a2a, 2, 2, 1, 30);
  ASSERT_EQ(r.status, SolveStatus::kSat);
  EXPECT_EQ(replay(ring, *r.schedule), "");
  const CollectiveSpec bcast{plan::Collective::kBroadcast, 2};
  SOLVE_OR_SKIP(b, ring, bcast, 2, 2, 2, 30);
  ASSERT_EQ(b.status, SolveStatus::kSat);
  EXPECT_EQ(replay(ring, *b.schedule), "");
  // Three chunks in two rounds: a neighbour of the root gets at most two from the root, and the
  // opposite rank holds nothing it could pass on before step 2.
  SOLVE_OR_SKIP(b3, ring, bcast, 2, 2, 3, 30);
  EXPECT_EQ(b3.status, SolveStatus::kUnsat);
}

TEST(ExactSolver, BadArgumentsAreRejected) {
  const RankGraph g = rankGraphFromMatrix({{0, 1}, {1, 0}});
  EXPECT_THROW(solveInstance(g, kAllGather, 0, 1, 1), Error);
  EXPECT_THROW(solveInstance(g, kAllGather, 2, 1, 1), Error);
  EXPECT_THROW(solveInstance(g, kAllGather, 1, 1, 0), Error);
  EXPECT_THROW(solveInstance(g, {plan::Collective::kAllReduce, 0}, 1, 1, 1), Error);
  EXPECT_THROW(solveInstance(g, {plan::Collective::kBroadcast, 5}, 1, 1, 1), Error);
  SolveOptions o;
  o.symmetry = {{0, 0}};  // not a permutation
  EXPECT_THROW(solveEncoding(g, kAllGather, 1, 1, 1, o), Error);
  o.symmetry.clear();
  o.roundsPerStep = {1, 1};  // two values for one step
  EXPECT_THROW(solveEncoding(g, kAllGather, 1, 2, 1, o), Error);
}

TEST(ExactSolver, FixedRoundsPerStepAreHonoured) {
  const RankGraph g = dgx1();
  SolveOptions o;
  o.timeoutSec = 30;
  o.roundsPerStep = {2, 1};
  const SolveResult r = solveEncoding(g, kAllGather, 2, 3, 2, o);
  if (r.status == SolveStatus::kUnknown) GTEST_SKIP() << "Z3 gave up";
  ASSERT_EQ(r.status, SolveStatus::kSat);
  EXPECT_EQ(r.schedule->roundsPerStep, (std::vector<int>{2, 1}));
  EXPECT_EQ(replay(g, *r.schedule), "");
}

}  // namespace
}  // namespace weft::synth::solver
