#include "src/plan/chunk_plan.h"

#include "src/common/error.h"

namespace weft::plan {

uint64_t sizeMultiplier(Collective coll, int nranks) {
  switch (coll) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAlltoAll:
      return static_cast<uint64_t>(nranks);
    default:
      return 1;
  }
}

uint64_t chunkElems(const ChunkPlan& plan, uint64_t count) {
  const uint64_t total = sizeMultiplier(plan.coll, plan.nranks) * count;
  if (plan.chunksPerLoop == 0 || total == 0 || total % plan.chunksPerLoop != 0) return 0;
  return total / plan.chunksPerLoop;
}

Plan instantiate(const ChunkPlan& cp, uint64_t count, uint32_t elemSize,
                 const std::string& algorithm) {
  const uint64_t chunk = chunkElems(cp, count);
  if (chunk == 0)
    throw Error(Status::kInvalidArgument, "plan '" + cp.name + "': count " + std::to_string(count) +
                                              " does not split into " +
                                              std::to_string(cp.chunksPerLoop) + " equal chunks");
  if (static_cast<int>(cp.programs.size()) != cp.nranks)
    throw Error(Status::kInvalidArgument,
                "plan '" + cp.name + "' has " + std::to_string(cp.programs.size()) +
                    " programs for " + std::to_string(cp.nranks) + " ranks");
  Plan plan;
  plan.algorithm = algorithm.empty() ? "msccl:" + cp.name : algorithm;
  plan.spec = Spec{cp.coll, cp.nranks, cp.root, count, elemSize};
  plan.inPlaceSafe = cp.inPlace;
  plan.outOfPlaceSafe = cp.outOfPlace;
  plan.programs.resize(cp.nranks);
  for (int r = 0; r < cp.nranks; ++r) {
    const ChunkProgram& in = cp.programs[r];
    const BufferSizes sizes = bufferSizes(plan.spec, r);
    if (in.inputChunks * chunk > sizes.input || in.outputChunks * chunk > sizes.output)
      throw Error(Status::kInvalidArgument,
                  "plan '" + cp.name + "' rank " + std::to_string(r) + ": buffers of " +
                      std::to_string(in.inputChunks) + "/" + std::to_string(in.outputChunks) +
                      " chunks exceed the " + collectiveName(cp.coll) + " buffers");
    Program& out = plan.programs[r];
    out.scratchElems = in.scratchChunks * chunk;
    out.lanes = in.lanes;
    for (Lane& lane : out.lanes)
      for (Step& s : lane.steps) {
        s.src.offset *= chunk;
        s.dst.offset *= chunk;
        s.count *= chunk;
      }
  }
  return plan;
}

}  // namespace weft::plan
