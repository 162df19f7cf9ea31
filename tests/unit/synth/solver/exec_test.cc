// Synthesized plans run for real: the DGX-1 allgather points, their reduce-scatter and allreduce
// duals, and small alltoall / broadcast schedules, instantiated and executed by the host executor
// on in-process ranks, give exactly the collective's result (out of place and in place).
#include <gtest/gtest.h>

#include <algorithm>

#include "run_plan.h"
#include "synth/solver/lower.h"
#include "tests/unit/synth/solver/solver_support.h"

namespace weft::synth::solver {
namespace {

using plan::Collective;
using synth::test::runAndCheck;

// A count whose chunks span several 64-element FIFO slots.
uint64_t countFor(const plan::ChunkPlan& cp) {
  uint64_t base = 1;  // the smallest count that splits into whole chunks
  while (plan::chunkElems(cp, base) == 0) ++base;
  return base * (150 / plan::chunkElems(cp, base) + 1);
}

TEST(ExactExecute, Dgx1AllGatherPointsAndTheirDuals) {
  const RankGraph g = testing::dgx1();
  for (auto [s, r, c] : {std::tuple{2, 3, 2}, std::tuple{3, 7, 6}}) {
    DGX1_OR_SKIP(res, s, r, c);
    ASSERT_EQ(res.status, SolveStatus::kSat);
    const plan::ChunkPlan ag = lowerToChunkPlan(g, *res.schedule);
    EXPECT_EQ(runAndCheck(ag, countFor(ag)), "");
    for (Collective dual : {Collective::kReduceScatter, Collective::kAllReduce}) {
      const plan::ChunkPlan cp = lowerCombining(g, *res.schedule, dual);
      EXPECT_EQ(runAndCheck(cp, countFor(cp)), "");
    }
  }
}

TEST(ExactExecute, AlltoallAndBroadcastOnARing) {
  const RankGraph ring =
      rankGraphFromMatrix({{0, 1, 0, 1}, {1, 0, 1, 0}, {0, 1, 0, 1}, {1, 0, 1, 0}}, "biring4");
  SOLVE_OR_SKIP(a, ring, {Collective::kAlltoAll, 0}, 2, 2, 1, 30);
  ASSERT_EQ(a.status, SolveStatus::kSat);
  const plan::ChunkPlan a2a = lowerToChunkPlan(ring, *a.schedule);
  EXPECT_EQ(runAndCheck(a2a, countFor(a2a)), "");
  SOLVE_OR_SKIP(b, ring, {Collective::kBroadcast, 2}, 2, 2, 2, 30);
  ASSERT_EQ(b.status, SolveStatus::kSat);
  const plan::ChunkPlan bcast = lowerToChunkPlan(ring, *b.schedule);
  EXPECT_EQ(runAndCheck(bcast, countFor(bcast)), "");
}

}  // namespace
}  // namespace weft::synth::solver
