// One entry point to the synthesizers for tools and communicators: a ChunkPlan for a collective
// on a Fabric by a named method (searched rings, searched trees, tree packing), the built-in
// ring as the baseline they are measured against, and the choice of which synthesized plans a
// communicator should use at which message sizes (simulated against that ring).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/plan/chunk_plan.h"
#include "src/plan/plan.h"
#include "synth/model/fabric.h"
#include "synth/model/simulator.h"

namespace weft::synth {

// "ring": NCCL-style ring search (synth/search/ring_search.h) and ringPlan.
// "tree": allreduce over the searched double binary (or per-host chain) trees.
// "pack": Blink / ForestColl tree packing (synth/pack/pack_plan.h).
enum class Method { kRing, kTree, kPack };
const char* methodName(Method m);
// "ring", "tree" or "pack"; false for anything else.
bool parseMethod(const std::string& name, Method* m);

// The plan `method` synthesizes for `coll` (root for broadcast / reduce). Throws
// weft::Error(kInvalidArgument) for a collective the method has no plan for (tree: allreduce
// only; ring and pack: allgather, reducescatter, allreduce, broadcast, reduce).
// `chooseBytes` > 0 lets pack choose among its job layouts and allreduce shapes by simulating
// them at that size (PackPlanOptions::chooseBytes: seconds on 16 ranks at 1 GiB); 0 is cheap.
plan::ChunkPlan synthesize(Method method, plan::Collective coll, const Fabric& fabric, int root = 0,
                           uint64_t chooseBytes = 0);

// The built-in algorithm `name` ("ring", "tree") in rank order for `bytes` (nccl-tests' terms),
// as the communicator would build it; throws when the algorithm does not support `coll`.
plan::Plan builtinPlan(const std::string& name, plan::Collective coll, int nranks, uint64_t bytes,
                       int root = 0);

// A synthesized plan a communicator should use, with the byte window where it won.
struct SelectedPlan {
  std::string method;      // "ring", "pack", ...
  plan::ChunkPlan plan;    // plan.minBytes / maxBytes set to the window (maxBytes 0: no limit)
  double predictedUs = 0;  // simulated time at the smallest size of its window
  double ringUs = 0;       // the built-in ring there
};

struct SelectionOptions {
  std::vector<plan::Collective> colls = {
      plan::Collective::kAllGather, plan::Collective::kReduceScatter, plan::Collective::kAllReduce};
  std::vector<Method> methods = {Method::kPack, Method::kRing};
  // Sizes the candidates are simulated at (bytes, increasing). A plan wins a size when it is
  // at least `minGain` faster than the built-in ring there and the fastest candidate.
  std::vector<uint64_t> sizes = {1u << 20, 16u << 20, 256u << 20};
  double minGain = 0.05;
  SimOptions sim;
  // Seconds selectPlans may spend (0: no limit): collectives not started by then are skipped,
  // with a note starting "time budget".
  double budgetSeconds = 0;
};

// For each collective, the candidates simulated against the built-in ring at every size; each run
// of consecutive sizes one candidate wins becomes one SelectedPlan. Its window reaches halfway
// (geometrically) to the neighbouring sizes it lost, starts at its first size when that is the
// smallest one and has no upper limit when it runs to the largest. A method that fails on the
// fabric (an exception) is skipped and named in *skipped when given.
std::vector<SelectedPlan> selectPlans(const Fabric& fabric, const SelectionOptions& options = {},
                                      std::vector<std::string>* skipped = nullptr);

}  // namespace weft::synth
