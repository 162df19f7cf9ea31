// Synthesized plans run for real: ring and packed ChunkPlans, instantiated and executed by the
// host executor on in-process ranks, give exactly the collective's result.
#include <gtest/gtest.h>

#include <numeric>

#include "run_plan.h"
#include "search_test_util.h"
#include "synth/pack/pack_plan.h"
#include "synth/search/ring_plan.h"
#include "synth/search/tree_search.h"

namespace weft::synth {
namespace {

using plan::Collective;
using test::runAndCheck;

// A count whose chunks span several 64-element FIFO slots.
uint64_t countFor(const plan::ChunkPlan& cp) {
  const uint64_t base = test::baseCount(cp);
  return base *
         std::max<uint64_t>(
             1, (150 * cp.chunksPerLoop) / (base * plan::sizeMultiplier(cp.coll, cp.nranks)) + 1);
}

TEST(Execute, RingPlansOnTheDgx1) {
  const Fabric f = test::goldenFabric("dgx1-v100");
  const auto rings = searchRings(f);
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce,
                       Collective::kBroadcast, Collective::kReduce}) {
    RingPlanOptions o;
    o.root = 3;
    const plan::ChunkPlan cp = ringPlan(c, rings, o);
    EXPECT_EQ(runAndCheck(cp, countFor(cp)), "");
  }
  const plan::ChunkPlan tree = treePlan(Collective::kAllReduce, searchTrees(f), 4);
  EXPECT_EQ(runAndCheck(tree, countFor(tree)), "");
}

TEST(Execute, PackedPlansOnAFragmentedDgx1) {
  FabricOptions o;
  o.gpus = {0, 1, 4, 5};
  const Fabric f = test::goldenFabric("dgx1-v100", o);
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce,
                       Collective::kBroadcast, Collective::kReduce}) {
    const plan::ChunkPlan cp = packPlan(c, f, 2);
    EXPECT_EQ(runAndCheck(cp, countFor(cp)), "");
  }
}

TEST(Execute, PackedAllReduceOnThePcieMachine) {
  const Fabric f = test::goldenFabric("pcie-8gpu");
  const plan::ChunkPlan cp = packPlan(Collective::kAllReduce, f);
  EXPECT_EQ(runAndCheck(cp, test::baseCount(cp) * 2), "");
}

// The allreduce as the packed reduce-scatter then the packed allgather (partial sums in the
// output buffer, each chunk broadcast once its sum is complete), in and out of place.
TEST(Execute, ReduceScatterThenAllGatherAllReduce) {
  FabricOptions o;
  o.gpus = {0, 1, 4, 5};
  PackPlanOptions po;
  po.allReduce = AllReduceShape::kRsAg;
  for (const Fabric& f : {test::goldenFabric("dgx1-v100", o), test::goldenFabric("pcie-8gpu")}) {
    const plan::ChunkPlan cp = packPlan(Collective::kAllReduce, f, 0, po);
    EXPECT_EQ(cp.name, "pack-allreduce-rsag");
    EXPECT_EQ(runAndCheck(cp, test::baseCount(cp) * 2), "");
  }
}

}  // namespace
}  // namespace weft::synth
