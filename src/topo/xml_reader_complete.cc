// Completion of a partial topology XML, as NCCL completes one from the live machine: GPUs
// without a device number get one, NICs without a <net> get one port (see xml_reader.h).
#include <algorithm>

#include "src/topo/xml_reader_internal.h"

namespace weft::topo::detail {

void XmlReader::complete() {
  auto byBusId = [&](std::vector<int> v) {
    std::stable_sort(v.begin(), v.end(), [&](int x, int y) {
      return normalizeBusId(topo_.node(x).pci.busId) < normalizeBusId(topo_.node(y).pci.busId);
    });
    return v;
  };
  for (int h = 0; h < topo_.hostCount(); ++h) {
    std::vector<char> used;
    auto take = [&used]() {
      size_t d = 0;
      while (d < used.size() && used[d]) ++d;
      if (d == used.size()) used.push_back(0);
      used[d] = 1;
      return static_cast<int>(d);
    };
    auto mark = [&used](int d) {
      if (d < 0 || d > 4096) return;
      if (static_cast<size_t>(d) >= used.size()) used.resize(d + 1, 0);
      used[d] = 1;
    };
    for (int g : topo_.find(NodeKind::kGpu, h)) mark(topo_.node(g).gpu.dev);
    for (int g : byBusId(pendingGpus_))
      if (topo_.node(g).host == h && topo_.node(g).gpu.dev < 0)
        topo_.mutableNode(g).gpu.dev = take();
    used.clear();
    for (int n : topo_.find(NodeKind::kNet, h)) mark(topo_.node(n).net.dev);
    for (int nic : byBusId(pendingNics_)) {
      if (topo_.node(nic).host != h) continue;
      Node n;
      n.kind = NodeKind::kNet;
      n.host = h;
      n.parent = nic;
      n.completed = true;
      n.net.dev = take();
      n.net.linkLayer = isInfinibandClass(topo_.node(nic).pci.classCode) ? "IB" : "Ethernet";
      topo_.addChildNode(std::move(n), LinkKind::kNet, netBandwidth(-1));
    }
  }
}

}  // namespace weft::topo::detail
