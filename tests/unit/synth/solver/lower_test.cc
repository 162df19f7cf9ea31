// Lowering solved schedules to ChunkPlans: the plans pass the symbolic verifier at several
// counts, and the simulator's predicted times order the two DGX-1 points as SCCL's cost model
// does.
#include "synth/solver/lower.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "src/common/error.h"
#include "src/plan/verifier.h"
#include "synth/model/bounds.h"
#include "synth/model/cost_model.h"
#include "synth/model/simulator.h"
#include "tests/unit/synth/solver/solver_support.h"

namespace weft::synth::solver {
namespace {

using testing::dgx1;

const CollectiveSpec kAllGather{plan::Collective::kAllGather, 0};

// Lowers and verifies at counts C, 2C and 5C (in place too, when the plan allows it).
void expectVerifies(const RankGraph& g, const Schedule& s) {
  const plan::ChunkPlan cp = lowerToChunkPlan(g, s);
  EXPECT_EQ(cp.nranks, g.nranks);
  for (uint64_t mult : {1, 2, 5}) {
    const uint64_t count = mult * s.instance.chunks;
    EXPECT_EQ(plan::verifyMessage(plan::instantiate(cp, count)), "")
        << cp.name << " at count " << count << "\n"
        << s.describe();
  }
  if (s.instance.chunks > 1) {
    EXPECT_THROW(plan::instantiate(cp, s.instance.chunks + 1), Error);
  }
}

TEST(ExactLower, Dgx1LatencyOptimalPlanVerifies) {
  const RankGraph g = dgx1();
  DGX1_OR_SKIP(r, 2, 3, 2);
  ASSERT_EQ(r.status, SolveStatus::kSat);
  expectVerifies(g, *r.schedule);
  const plan::ChunkPlan cp = lowerToChunkPlan(g, *r.schedule);
  EXPECT_EQ(cp.chunksPerLoop, 16u);
  EXPECT_EQ(cp.name, "sccl-allgather-s2-r3-c2");
  // A lane per used link unit and direction, plus the local copy: every rank has six NVLink
  // units each way, so at most 6 send + 6 receive lanes + 1.
  for (const plan::ChunkProgram& p : cp.programs) EXPECT_LE(p.lanes.size(), 13u);
}

TEST(ExactLower, Dgx1BandwidthOptimalPlanVerifies) {
  const RankGraph g = dgx1();
  DGX1_OR_SKIP(r, 3, 7, 6);
  ASSERT_EQ(r.status, SolveStatus::kSat);
  expectVerifies(g, *r.schedule);
  EXPECT_EQ(lowerToChunkPlan(g, *r.schedule).chunksPerLoop, 48u);
}

TEST(ExactLower, SmallGraphPlansVerify) {
  const RankGraph ring =
      rankGraphFromMatrix({{0, 1, 0, 1}, {1, 0, 1, 0}, {0, 1, 0, 1}, {1, 0, 1, 0}}, "biring4");
  SOLVE_OR_SKIP(a, ring, {plan::Collective::kAlltoAll, 0}, 2, 2, 1, 30);
  ASSERT_EQ(a.status, SolveStatus::kSat);
  expectVerifies(ring, *a.schedule);
  // Relays keep the opposite rank's chunks in scratch.
  const plan::ChunkPlan cp = lowerToChunkPlan(ring, *a.schedule);
  EXPECT_FALSE(cp.inPlace);
  uint64_t scratch = 0;
  for (const plan::ChunkProgram& p : cp.programs) scratch += p.scratchChunks;
  EXPECT_EQ(scratch, 4u);

  SOLVE_OR_SKIP(b, ring, {plan::Collective::kBroadcast, 2}, 2, 2, 2, 30);
  ASSERT_EQ(b.status, SolveStatus::kSat);
  expectVerifies(ring, *b.schedule);

  const RankGraph triangle = rankGraphFromMatrix({{0, 2, 1}, {2, 0, 1}, {1, 1, 0}}, "triangle");
  SOLVE_OR_SKIP(t, triangle, kAllGather, 2, 3, 3, 30);
  ASSERT_EQ(t.status, SolveStatus::kSat);
  expectVerifies(triangle, *t.schedule);
}

TEST(ExactLower, RandomGraphPlansVerify) {
  // Small random graphs (3-5 ranks, links of 0-2 units, symmetric or not): every point of every
  // collective's frontier lowers to a plan the verifier accepts, and so do the duals of the
  // allgather points where links go both ways.
  std::mt19937 rng(20240601);
  int plans = 0;
  for (int iter = 0; iter < 12; ++iter) {
    const int n = 3 + static_cast<int>(rng() % 3);
    const bool undirected = rng() % 2;
    std::vector<std::vector<int>> units(n, std::vector<int>(n, 0));
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b && (!undirected || a < b)) {
          const int u = std::min(2, static_cast<int>(rng() % 4));
          units[a][b] = u;
          if (undirected) units[b][a] = u;
        }
    const RankGraph g = rankGraphFromMatrix(units, "random" + std::to_string(iter));
    bool connected = true, bothWays = true;
    for (const auto& row : g.hops())
      for (int h : row) connected = connected && h >= 0;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) bothWays = bothWays && (units[a][b] > 0) == (units[b][a] > 0);
    if (!connected) continue;
    for (plan::Collective coll : {plan::Collective::kAllGather, plan::Collective::kAlltoAll,
                                  plan::Collective::kBroadcast}) {
      ParetoOptions o;
      o.maxChunks = 2;
      o.maxExtraRounds = 2;
      o.timeoutSec = 10;
      const ParetoResult p = paretoFrontier(g, {coll, static_cast<int>(rng() % n)}, o);
      for (const ParetoPoint& pt : p.points) {
        EXPECT_EQ(testing::replay(g, pt.schedule), "") << g.describe();
        const plan::ChunkPlan cp = lowerToChunkPlan(g, pt.schedule);
        EXPECT_EQ(plan::verifyMessage(plan::instantiate(cp, 2 * cp.chunksPerLoop)), "")
            << g.describe() << pt.schedule.describe();
        ++plans;
        if (coll != plan::Collective::kAllGather || !bothWays) continue;
        for (plan::Collective dual :
             {plan::Collective::kReduceScatter, plan::Collective::kAllReduce}) {
          const plan::ChunkPlan d = lowerCombining(g, pt.schedule, dual);
          EXPECT_EQ(plan::verifyMessage(plan::instantiate(d, d.chunksPerLoop)), "")
              << d.name << "\n"
              << g.describe() << pt.schedule.describe();
          ++plans;
        }
      }
    }
  }
  EXPECT_GT(plans, 20);
}

TEST(ExactLower, BrokenSchedulesAreRejected) {
  const RankGraph ring =
      rankGraphFromMatrix({{0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}}, "ring4");
  SOLVE_OR_SKIP(r, ring, kAllGather, 3, 3, 1, 30);
  ASSERT_EQ(r.status, SolveStatus::kSat);
  Schedule s = *r.schedule;
  s.sends.pop_back();  // a chunk misses its last hop
  EXPECT_THROW(lowerToChunkPlan(ring, s), Error);
  s = *r.schedule;
  s.sends.push_back({0, 0, 2, 0});  // no link 0->2
  EXPECT_THROW(lowerToChunkPlan(ring, s), Error);
  s = *r.schedule;
  for (ChunkSend& m : s.sends)
    if (m.step == 1) m.step = 0;  // forwards before receiving
  EXPECT_THROW(lowerToChunkPlan(ring, s), Error);
}

TEST(ExactLower, SimulatedTimesFollowSccLsCostModel) {
  const RankGraph g = dgx1();
  const Fabric fabric = fabricFromTopology(testing::golden("dgx1-v100.xml"));
  DGX1_OR_SKIP(lat, 2, 3, 2);
  DGX1_OR_SKIP(bw, 3, 7, 6);
  ASSERT_EQ(lat.status, SolveStatus::kSat);
  ASSERT_EQ(bw.status, SolveStatus::kSat);
  const plan::ChunkPlan latPlan = lowerToChunkPlan(g, *lat.schedule);
  const plan::ChunkPlan bwPlan = lowerToChunkPlan(g, *bw.schedule);
  // Large messages: the bandwidth term dominates; R/C = 7/6 beats 3/2, and neither beats the
  // fabric's lower bound. With 25 GB/s units, (R/C) * L / 25 GB/s is SCCL's bandwidth cost.
  const uint64_t big = 192ull << 20;  // allgather output bytes
  const double share = static_cast<double>(big) / 8;
  const double bigLat = simulate(latPlan, big, fabric).timeUs;
  const double bigBw = simulate(bwPlan, big, fabric).timeUs;
  const double bound = lowerBound(plan::Collective::kAllGather, fabric, big).timeUs;
  EXPECT_LT(bigBw, bigLat);
  EXPECT_GE(bigBw, bound * 0.999);
  EXPECT_GE(bigLat, bound * 0.999);
  const double unitUs = share / (25.0 * kBytesPerUsPerGBs);
  EXPECT_LT(bigBw, 1.05 * (7.0 / 6.0) * unitUs);
  EXPECT_LT(bigLat, 1.05 * (3.0 / 2.0) * unitUs);
  // Small messages: latency dominates, and two steps beat three.
  const uint64_t small = 48 * 1024;
  EXPECT_LT(simulate(latPlan, small, fabric).timeUs, simulate(bwPlan, small, fabric).timeUs);
}

// Reduce-scatter and allreduce by duality verify at counts that split into whole chunks.
void expectCombiningVerifies(const RankGraph& g, const Schedule& allgather) {
  const int n = g.nranks, c = allgather.instance.chunks;
  const plan::ChunkPlan rs = lowerCombining(g, allgather, plan::Collective::kReduceScatter);
  for (uint64_t count : {uint64_t(c), uint64_t(3 * c)})
    EXPECT_EQ(plan::verifyMessage(plan::instantiate(rs, count)), "")
        << rs.name << " at count " << count << "\n"
        << allgather.describe();
  const plan::ChunkPlan ar = lowerCombining(g, allgather, plan::Collective::kAllReduce);
  for (uint64_t count : {uint64_t(n * c), uint64_t(2 * n * c)})
    EXPECT_EQ(plan::verifyMessage(plan::instantiate(ar, count)), "")
        << ar.name << " at count " << count << "\n"
        << allgather.describe();
}

TEST(ExactLowerCombining, Dgx1ReduceScatterAndAllReduceVerify) {
  const RankGraph g = dgx1();
  DGX1_OR_SKIP(lat, 2, 3, 2);
  ASSERT_EQ(lat.status, SolveStatus::kSat);
  expectCombiningVerifies(g, *lat.schedule);
  DGX1_OR_SKIP(bw, 3, 7, 6);
  ASSERT_EQ(bw.status, SolveStatus::kSat);
  expectCombiningVerifies(g, *bw.schedule);
  const plan::ChunkPlan ar = lowerCombining(g, *bw.schedule, plan::Collective::kAllReduce);
  EXPECT_EQ(ar.chunksPerLoop, 48u);
  EXPECT_EQ(ar.name, "sccl-allreduce-s3-r7-c6");
}

TEST(ExactLowerCombining, DirectedRingReduceScatterUsesTheTransposedGraph) {
  const RankGraph ring =
      rankGraphFromMatrix({{0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}}, "ring4");
  SOLVE_OR_SKIP(r, transposed(ring), kAllGather, 3, 3, 1, 30);
  ASSERT_EQ(r.status, SolveStatus::kSat);
  const plan::ChunkPlan rs = lowerCombining(ring, *r.schedule, plan::Collective::kReduceScatter);
  EXPECT_EQ(plan::verifyMessage(plan::instantiate(rs, 2)), "");
  // Allreduce also needs the allgather's own direction, which the directed ring lacks.
  EXPECT_THROW(lowerCombining(ring, *r.schedule, plan::Collective::kAllReduce), Error);
  // Not an allgather, or no dual.
  EXPECT_THROW(lowerCombining(ring, *r.schedule, plan::Collective::kBroadcast), Error);
  SOLVE_OR_SKIP(b, ring, {plan::Collective::kBroadcast, 0}, 3, 3, 1, 30);
  ASSERT_EQ(b.status, SolveStatus::kSat);
  EXPECT_THROW(lowerCombining(ring, *b.schedule, plan::Collective::kReduceScatter), Error);
}

TEST(ExactLowerCombining, SimulatedAllReduceIsTwiceTheAllGather) {
  const RankGraph g = dgx1();
  const Fabric fabric = fabricFromTopology(testing::golden("dgx1-v100.xml"));
  DGX1_OR_SKIP(bw, 3, 7, 6);
  ASSERT_EQ(bw.status, SolveStatus::kSat);
  // Allreduce of M bytes: reduce-scatter and allgather of M/8 per rank, each (7/6) L / 25 GB/s.
  const uint64_t bytes = 192ull << 20;
  const double unitUs = static_cast<double>(bytes) / 8 / (25.0 * kBytesPerUsPerGBs);
  const plan::ChunkPlan ar = lowerCombining(g, *bw.schedule, plan::Collective::kAllReduce);
  const double t = simulate(ar, bytes, fabric).timeUs;
  EXPECT_GE(t, lowerBound(plan::Collective::kAllReduce, fabric, bytes).timeUs * 0.999);
  EXPECT_LT(t, 1.05 * 2 * (7.0 / 6.0) * unitUs);
  // The reduce-scatter alone (M bytes of input per rank) costs what the allgather does.
  const plan::ChunkPlan rs = lowerCombining(g, *bw.schedule, plan::Collective::kReduceScatter);
  EXPECT_LT(simulate(rs, bytes, fabric).timeUs, 1.05 * (7.0 / 6.0) * unitUs);
}

}  // namespace
}  // namespace weft::synth::solver
