// SimResult reporting and the ChunkPlan convenience of the simulator.
#include <algorithm>
#include <numeric>
#include <sstream>

#include "src/common/error.h"
#include "synth/model/simulator.h"

namespace weft::synth {

std::string SimResult::summary(const Fabric& fabric) const {
  std::ostringstream o;
  o.precision(6);
  o << "predicted " << timeUs << " us, " << events << " events; last step: rank " << lastStep.rank
    << " lane " << lastStep.lane << " step " << lastStep.step << "\n";
  std::vector<int> order(links.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return links[a].busyUs > links[b].busyUs; });
  for (size_t i = 0; i < order.size() && i < 5; ++i) {
    const LinkUsage& u = links[order[i]];
    if (u.bytes <= 0) break;
    const FabricLink& l = fabric.links[order[i]];
    o << "  link " << fabric.nodes[l.from].name << " -> " << fabric.nodes[l.to].name << ": "
      << u.bytes << " B, busy " << u.busyUs << " us (" << (timeUs > 0 ? 100 * u.busyUs / timeUs : 0)
      << "%)\n";
  }
  const size_t shown = std::min<size_t>(criticalPath.size(), 8);
  o << "  critical path (" << criticalPath.size() << " steps, last " << shown << "):\n";
  for (size_t i = criticalPath.size() - shown; i < criticalPath.size(); ++i) {
    const CriticalStep& c = criticalPath[i];
    o << "    rank " << c.id.rank << " lane " << c.id.lane << " step " << c.id.step << " ["
      << c.startUs << ", " << c.endUs << "] us" << (c.waitedFor.empty() ? "" : " after ")
      << c.waitedFor << "\n";
  }
  return o.str();
}

uint64_t countForBytes(plan::Collective coll, int nranks, uint64_t bytes, uint32_t elemSize) {
  if (elemSize == 0 || nranks <= 0)
    throw Error(Status::kInvalidArgument, "countForBytes: bad element size or rank count");
  switch (coll) {
    case plan::Collective::kAllGather:
    case plan::Collective::kReduceScatter:
    case plan::Collective::kAlltoAll:
    case plan::Collective::kGather:
    case plan::Collective::kScatter:
      return bytes / elemSize / nranks;
    default:
      return bytes / elemSize;
  }
}

SimResult simulate(const plan::ChunkPlan& chunkPlan, uint64_t bytes, const Fabric& fabric,
                   const SimOptions& options, uint32_t elemSize) {
  uint64_t count = countForBytes(chunkPlan.coll, chunkPlan.nranks, bytes, elemSize);
  // MSCCL needs sizeMultiplier * count to be a multiple of chunksPerLoop.
  const uint64_t mult = plan::sizeMultiplier(chunkPlan.coll, chunkPlan.nranks);
  const uint64_t chunks = std::max<uint64_t>(1, chunkPlan.chunksPerLoop);
  const uint64_t unit = chunks / std::gcd(chunks, std::max<uint64_t>(1, mult));
  count = std::max(unit, (count + unit - 1) / unit * unit);
  return simulate(plan::instantiate(chunkPlan, count, elemSize), fabric, options);
}

}  // namespace weft::synth
