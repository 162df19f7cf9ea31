// How two GPUs of this host reach each other, and so how a CUDA connection moves data between
// them: over NVLink (directly or through NVSwitches) a kernel loads and stores the peer's
// memory; over PCIe peer-to-peer the copy engine moves it (SM loads across PCIe are slow and
// steal SMs from the reduction); without P2P the data is staged through host memory.
// Built from NVML's NVLink map (src/topo/probes/nvml_probe.h) and the driver's
// cuDeviceCanAccessPeer, matched by PCI bus id since CUDA ordinals need not follow NVML order.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "src/cuda/driver_api.h"
#include "src/topo/probes/probe.h"

namespace weft::transport::cuda {

enum class PeerPath {
  kSame,      // the same GPU
  kNvLink,    // direct NVLinks between the two
  kNvSwitch,  // both reach an NVSwitch fabric
  kPcie,      // PCIe peer-to-peer (cuDeviceCanAccessPeer) without NVLink
  kNone,      // no peer access
};

enum class PeerAccess {
  kLoadStore,   // kernels read and write the peer's memory (NVLink, NVSwitch, same GPU)
  kCopyEngine,  // cudaMemcpyPeer-style DMA (PCIe P2P)
  kHostStaged,  // through host memory
};

struct PeerLink {
  PeerPath path = PeerPath::kNone;
  int nvlinks = 0;  // direct links (kNvLink), or the fewer of the two GPUs' switch links
};

const char* peerPathName(PeerPath p);
const char* peerAccessName(PeerAccess a);

class PeerLinkMap {
 public:
  PeerLinkMap() = default;
  // `cudaBusIds[i]` is CUDA ordinal i's PCI bus id (any case, with or without the 8-digit
  // domain); `canAccessPeer(a, b)` says whether ordinal a can access b's memory.
  static PeerLinkMap build(const std::vector<topo::probe::NvmlGpu>& nvml,
                           const std::vector<std::string>& cudaBusIds,
                           const std::function<bool(int, int)>& canAccessPeer);

  int devices() const { return devices_; }
  // By CUDA ordinal; out-of-range ordinals have no link (kNone).
  PeerLink link(int a, int b) const;
  PeerAccess access(int a, int b) const;
  std::string describe() const;  // one line per ordered pair, for NCCL_DEBUG=INFO

 private:
  int devices_ = 0;
  std::vector<PeerLink> links_;  // devices_ x devices_, row a = from a
};

// The map of this host: NVML (where present) and the driver; `why` says what was missing
// (devices() is 0 without a driver or without CUDA initialized).
PeerLinkMap probePeerLinks(const weft::cuda::DriverApi* api, std::string* why);

}  // namespace weft::transport::cuda
