// What weft-synth writes besides MSCCL XML: a readable text form and a Graphviz picture.
#pragma once
#include <cstdint>
#include <string>

#include "src/plan/chunk_plan.h"
#include "synth/model/fabric.h"

namespace weft::synth {

// The smallest API count that cuts the plan into whole chunks (one element per chunk).
uint64_t smallestCount(const plan::ChunkPlan& plan);

// A header (collective, ranks, chunks, lanes per rank) and plan::toText of the plan instantiated
// at smallestCount(), where element offsets are chunk indices.
std::string planText(const plan::ChunkPlan& plan);

// Graphviz: ranks as nodes (named as in the fabric), one edge per (sender, receiver, channel)
// labelled with the chunks sent, coloured by channel (each lane group / tree of a synthesized
// plan has its channel).
std::string planDot(const plan::ChunkPlan& plan, const Fabric& fabric);

}  // namespace weft::synth
