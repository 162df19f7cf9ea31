// Lowers a solved schedule to a ChunkPlan (the count-independent MSCCL-model plan). Every link
// unit in use gets a send lane at its source and a receive lane at its target on its own channel;
// the chunks a link carries in a step are dealt over its units in order, so each FIFO's sends
// and receives match. A rank forwards a chunk only after the receive that brought it.
//
// Combining collectives come from an allgather schedule by SCCL's duality: reversing every move
// in direction and time gives a reduce-scatter (each rank reduces what its children in the
// allgather's tree send it, then passes the partial sum on), and allreduce is that reduce-scatter
// followed by the allgather.
#pragma once
#include <string>

#include "src/plan/chunk_plan.h"
#include "synth/solver/rank_graph.h"
#include "synth/solver/solver.h"

namespace weft::synth::solver {

// Throws weft::Error(kInvalidArgument) when the schedule does not fit the graph (a send over a
// missing link, a chunk forwarded by a rank that never received it, a destination left out).
plan::ChunkPlan lowerToChunkPlan(const RankGraph& graph, const Schedule& schedule,
                                 const std::string& name = "");

// Reduce-scatter (coll = kReduceScatter) or allreduce (kAllReduce) from an allgather schedule.
// The reduce-scatter moves run over the reversed links, so `graph` needs a link b->a for every
// allgather move a->b (an allgather solved on transposed(graph) gives exactly that for
// reduce-scatter; allreduce needs both directions). Allreduce takes 2S steps and 2R rounds.
plan::ChunkPlan lowerCombining(const RankGraph& graph, const Schedule& allgather,
                               plan::Collective coll, const std::string& name = "");

// The graph with every link reversed.
RankGraph transposed(const RankGraph& graph);

}  // namespace weft::synth::solver
