// Bottleneck-bandwidth arithmetic for a ChunkPlan on a Fabric: every send moves its chunks over
// each directed link of the fabric route between the two ranks, and with enough pipelining the
// loop takes as long as the most loaded link needs. Latency, step overheads and the order of
// steps are ignored: this is the bandwidth term of the alpha-beta model (what Blink, ForestColl
// and NCCL's busbw compare), an upper bound on what the plan can reach.
#pragma once
#include <vector>

#include "src/plan/chunk_plan.h"
#include "synth/model/fabric.h"

namespace weft::synth {

// Chunks each directed link carries per loop (index = link).
std::vector<double> linkChunkLoads(const plan::ChunkPlan& plan, const Fabric& fabric);

// Algorithm bandwidth in GB/s by the bottleneck link: loop bytes (total output for allgather,
// total input for reduce-scatter, the buffer for the others: nccl-tests' algbw sizes) divided
// by the time of the most loaded link. Infinity when nothing crosses a link.
double bottleneckAlgBw(const plan::ChunkPlan& plan, const Fabric& fabric);

}  // namespace weft::synth
