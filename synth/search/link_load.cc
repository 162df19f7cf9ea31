#include "synth/search/link_load.h"

#include <algorithm>
#include <limits>
#include <string>

#include "src/common/error.h"

namespace weft::synth {

std::vector<double> linkChunkLoads(const plan::ChunkPlan& cp, const Fabric& f) {
  if (cp.nranks != f.nranks)
    throw Error(Status::kInvalidArgument, "link load: plan '" + cp.name + "' has " +
                                              std::to_string(cp.nranks) + " ranks, fabric " +
                                              std::to_string(f.nranks));
  std::vector<double> load(f.links.size(), 0.0);
  for (int r = 0; r < cp.nranks; ++r)
    for (const plan::Lane& lane : cp.programs[r].lanes)
      for (const plan::Step& s : lane.steps) {
        if (!plan::opSends(s.op)) continue;
        if (s.sendPeer < 0 || s.sendPeer >= f.nranks || s.sendPeer == r)
          throw Error(Status::kInvalidArgument, "link load: plan '" + cp.name + "' rank " +
                                                    std::to_string(r) + " sends to rank " +
                                                    std::to_string(s.sendPeer));
        for (int l : f.routes[r][s.sendPeer]) load[l] += static_cast<double>(s.count);
      }
  return load;
}

double bottleneckAlgBw(const plan::ChunkPlan& cp, const Fabric& f) {
  const std::vector<double> load = linkChunkLoads(cp, f);
  double worst = 0;  // seconds per chunk-of-a-GB, i.e. chunks / (GB/s)
  for (size_t l = 0; l < load.size(); ++l)
    if (load[l] > 0) worst = std::max(worst, load[l] / f.links[l].bw);
  if (worst == 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(cp.chunksPerLoop) / worst;
}

}  // namespace weft::synth
