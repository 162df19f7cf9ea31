#include "transports/cuda/peer_links.h"

#include <algorithm>
#include <map>

#include "src/topo/probes/nvml_probe.h"
#include "src/topo/topology.h"

namespace weft::transport::cuda {
namespace {

constexpr int kNvmlRemoteGpu = 0;     // nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_GPU
constexpr int kNvmlRemoteSwitch = 2;  // NVML_NVLINK_DEVICE_TYPE_SWITCH

}  // namespace

const char* peerPathName(PeerPath p) {
  switch (p) {
    case PeerPath::kSame:
      return "same GPU";
    case PeerPath::kNvLink:
      return "NVLink";
    case PeerPath::kNvSwitch:
      return "NVSwitch";
    case PeerPath::kPcie:
      return "PCIe P2P";
    case PeerPath::kNone:
      return "no P2P";
  }
  return "?";
}

const char* peerAccessName(PeerAccess a) {
  switch (a) {
    case PeerAccess::kLoadStore:
      return "load/store";
    case PeerAccess::kCopyEngine:
      return "copy engine";
    case PeerAccess::kHostStaged:
      return "host staged";
  }
  return "?";
}

PeerLinkMap PeerLinkMap::build(const std::vector<topo::probe::NvmlGpu>& nvml,
                               const std::vector<std::string>& cudaBusIds,
                               const std::function<bool(int, int)>& canAccessPeer) {
  PeerLinkMap m;
  m.devices_ = static_cast<int>(cudaBusIds.size());
  m.links_.assign(static_cast<size_t>(m.devices_) * m.devices_, PeerLink{});
  std::map<std::string, int> ordinalOfBus;
  for (int i = 0; i < m.devices_; ++i) ordinalOfBus[topo::normalizeBusId(cudaBusIds[i])] = i;
  // Per CUDA ordinal: direct links to each other ordinal, and links into a switch fabric.
  std::vector<std::map<int, int>> direct(m.devices_);
  std::vector<int> switchLinks(m.devices_, 0);
  for (const topo::probe::NvmlGpu& g : nvml) {
    auto self = ordinalOfBus.find(topo::normalizeBusId(g.busId));
    if (self == ordinalOfBus.end()) continue;  // hidden from CUDA (CUDA_VISIBLE_DEVICES)
    for (const topo::probe::NvLinkPeer& l : g.nvlinks) {
      auto far = ordinalOfBus.find(topo::normalizeBusId(l.remoteBusId));
      if (far != ordinalOfBus.end() && (l.remoteType == kNvmlRemoteGpu || l.remoteType == -1)) {
        ++direct[self->second][far->second];
      } else if (l.remoteType == kNvmlRemoteSwitch ||
                 (l.remoteType == -1 && far == ordinalOfBus.end())) {
        // NCCL's rule too: a far end of unknown type that is no GPU here is a switch.
        ++switchLinks[self->second];
      }
    }
  }
  for (int a = 0; a < m.devices_; ++a) {
    for (int b = 0; b < m.devices_; ++b) {
      PeerLink& l = m.links_[static_cast<size_t>(a) * m.devices_ + b];
      if (a == b) {
        l.path = PeerPath::kSame;
        continue;
      }
      const bool p2p = canAccessPeer && canAccessPeer(a, b);
      auto d = direct[a].find(b);
      if (d != direct[a].end() && p2p) {
        l = {PeerPath::kNvLink, d->second};
      } else if (switchLinks[a] > 0 && switchLinks[b] > 0 && p2p) {
        l = {PeerPath::kNvSwitch, std::min(switchLinks[a], switchLinks[b])};
      } else if (p2p) {
        l.path = PeerPath::kPcie;
      }
    }
  }
  return m;
}

PeerLink PeerLinkMap::link(int a, int b) const {
  if (a < 0 || b < 0 || a >= devices_ || b >= devices_) return PeerLink{};
  return links_[static_cast<size_t>(a) * devices_ + b];
}

PeerAccess PeerLinkMap::access(int a, int b) const {
  switch (link(a, b).path) {
    case PeerPath::kSame:
    case PeerPath::kNvLink:
    case PeerPath::kNvSwitch:
      return PeerAccess::kLoadStore;
    case PeerPath::kPcie:
      return PeerAccess::kCopyEngine;
    case PeerPath::kNone:
      break;
  }
  return PeerAccess::kHostStaged;
}

std::string PeerLinkMap::describe() const {
  std::string out;
  for (int a = 0; a < devices_; ++a)
    for (int b = 0; b < devices_; ++b) {
      if (a == b) continue;
      const PeerLink l = link(a, b);
      out +=
          "GPU " + std::to_string(a) + " -> GPU " + std::to_string(b) + ": " + peerPathName(l.path);
      if (l.nvlinks) out += " x" + std::to_string(l.nvlinks);
      out += std::string(", ") + peerAccessName(access(a, b)) + "\n";
    }
  return out;
}

PeerLinkMap probePeerLinks(const weft::cuda::DriverApi* api, std::string* why) {
  using namespace weft::cuda;
  if (!api || !api->deviceGetPciBusId || !api->deviceCanAccessPeer) {
    *why = "no CUDA driver with cuDeviceGetPCIBusId and cuDeviceCanAccessPeer";
    return PeerLinkMap{};
  }
  int count = 0;
  if (CuResult rc = api->deviceGetCount(&count); rc != kCuSuccess) {
    *why = "cuDeviceGetCount: " + resultText(api, rc);
    return PeerLinkMap{};
  }
  std::vector<std::string> busIds;
  for (int i = 0; i < count; ++i) {
    char bus[32] = {};
    CuDevice dev = i;
    if (api->deviceGet) api->deviceGet(&dev, i);
    if (api->deviceGetPciBusId(bus, sizeof bus, dev) != kCuSuccess) bus[0] = '\0';
    busIds.emplace_back(bus);
  }
  std::vector<topo::probe::NvmlGpu> nvml;
  topo::probe::Report report;
  if (!topo::probe::probeNvml(&nvml, &report)) *why = "NVML: " + report.detail;
  return PeerLinkMap::build(nvml, busIds, [api](int a, int b) {
    CuDevice da = a, db = b;
    if (api->deviceGet) api->deviceGet(&da, a), api->deviceGet(&db, b);
    int can = 0;
    return api->deviceCanAccessPeer(&can, da, db) == kCuSuccess && can != 0;
  });
}

}  // namespace weft::transport::cuda
