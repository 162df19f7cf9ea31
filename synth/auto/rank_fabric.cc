#include "synth/auto/rank_fabric.h"

#include <algorithm>

namespace weft::synth {

std::optional<Fabric> fabricForRanks(const topo::SystemTopology& system, std::string* why) {
  const topo::Topology& t = system.graph();
  const int n = system.nranks();
  FabricOptions options;
  const std::vector<int> gpus = t.find(topo::NodeKind::kGpu);
  if (!gpus.empty()) {
    bool onGpus = true;
    for (int r = 0; r < n && onGpus; ++r) {
      auto it = std::find(gpus.begin(), gpus.end(), system.rankNode(r));
      if (it == gpus.end() || std::find(options.gpus.begin(), options.gpus.end(),
                                        it - gpus.begin()) != options.gpus.end())
        onGpus = false;
      else
        options.gpus.push_back(static_cast<int>(it - gpus.begin()));
    }
    if (!onGpus) {
      if (n > static_cast<int>(gpus.size())) {
        *why = std::to_string(n) + " ranks on CPUs but only " + std::to_string(gpus.size()) +
               " GPUs in the topology";
        return std::nullopt;
      }
      options.gpus.clear();
      for (int g = 0; g < n; ++g) options.gpus.push_back(g);
    }
  } else {
    const int hosts = t.hostCount();
    if (hosts < 1 || n % hosts != 0) {
      *why = std::to_string(n) + " host ranks do not split evenly over " + std::to_string(hosts) +
             " hosts";
      return std::nullopt;
    }
    for (int r = 0; r < n; ++r)
      if (system.rankHost(r) != r / (n / hosts)) {
        *why = "ranks are not numbered host by host (rank " + std::to_string(r) + " is on host " +
               std::to_string(system.rankHost(r)) + ")";
        return std::nullopt;
      }
    options.hostRanksPerHost = n / hosts;
  }
  try {
    Fabric f = fabricFromTopology(t, options);
    if (f.nranks != n) {
      *why = "the fabric has " + std::to_string(f.nranks) + " ranks, the communicator " +
             std::to_string(n);
      return std::nullopt;
    }
    return f;
  } catch (const std::exception& e) {
    *why = e.what();
    return std::nullopt;
  }
}

bool worthSynthesizing(const topo::SystemTopology& system) {
  if (!system.graph().find(topo::NodeKind::kGpu).empty()) return true;
  for (int r = 1; r < system.nranks(); ++r)
    if (system.rankHost(r) != system.rankHost(0)) return true;
  return false;
}

}  // namespace weft::synth
