// Lowers a solved schedule to a ChunkPlan (the count-independent MSCCL-model plan): every link
// unit gets a send lane at its source and a receive lane at its target on its own channel, the
// chunks of a step are spread over a link's units, and a rank forwards a chunk only after the
// receive that brought it.
#pragma once
#include <string>

#include "src/plan/chunk_plan.h"
#include "synth/solver/rank_graph.h"
#include "synth/solver/solver.h"

namespace weft::synth::solver {

// Throws weft::Error(kInvalidArgument) when the schedule does not fit the graph (a send over a
// missing link, a chunk forwarded by a rank that never received it).
plan::ChunkPlan lowerToChunkPlan(const RankGraph& graph, const Schedule& schedule,
                                 const std::string& name = "");

}  // namespace weft::synth::solver
