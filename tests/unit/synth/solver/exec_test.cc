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

int32_t value(int rank, uint64_t i) { return (rank + 1) * 1000 + static_cast<int32_t>(i % 997); }

// Runs `cp` at `count`; returns "" or the first wrong element.
std::string runAndCheck(const plan::ChunkPlan& cp, uint64_t count) {
  const plan::Plan p = plan::instantiate(cp, count);
  const int n = p.spec.nranks;
  std::vector<std::vector<int32_t>> in(n);
  for (int r = 0; r < n; ++r) {
    in[r].resize(plan::bufferSizes(p.spec, r).input);
    for (uint64_t i = 0; i < in[r].size(); ++i) in[r][i] = value(r, i);
  }
  auto sum = [&](uint64_t i) {
    int32_t s = 0;
    for (int q = 0; q < n; ++q) s += value(q, i);
    return s;
  };
  std::vector<bool> modes{false};
  if (cp.inPlace) modes.push_back(true);
  for (bool inPlace : modes) {
    const auto out = synth::test::runPlan(p, in, inPlace, 256);
    for (int r = 0; r < n; ++r)
      for (uint64_t i = 0; i < out[r].size(); ++i) {
        int32_t want = 0;
        switch (cp.coll) {
          case Collective::kAllGather:
            want = value(static_cast<int>(i / count), i % count);
            break;
          case Collective::kAlltoAll:
            want = value(static_cast<int>(i / count), r * count + i % count);
            break;
          case Collective::kBroadcast:
            want = value(cp.root, i);
            break;
          case Collective::kReduceScatter:
            want = sum(r * count + i);
            break;
          default:
            want = sum(i);
            break;
        }
        if (out[r][i] != want)
          return cp.name + (inPlace ? " in place" : "") + ": rank " + std::to_string(r) +
                 " output[" + std::to_string(i) + "] = " + std::to_string(out[r][i]) +
                 ", expected " + std::to_string(want);
      }
  }
  return "";
}

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
