#include "src/topo/probes/nvml_probe.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>

namespace weft::topo::probe {
namespace {

// The parts of NVML's ABI (nvml.h) used here.
using NvmlDevice = struct NvmlDeviceOpaque*;
using NvmlReturn = int;  // NVML_SUCCESS = 0
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlFeatureEnabled = 1;
constexpr unsigned kNvlinkCapP2pSupported = 0;
constexpr unsigned kFieldNvlinkGetState = 165;  // NVML_FI_DEV_NVLINK_GET_STATE

struct NvmlPciInfo {  // nvmlPciInfo_t (v3)
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

struct NvmlFieldValue {  // nvmlFieldValue_t
  uint32_t fieldId;
  uint32_t scopeId;
  int64_t timestamp;
  int64_t latencyUsec;
  int valueType;
  NvmlReturn nvmlReturn;
  union {
    double dVal;
    unsigned uiVal;
    unsigned long long ullVal;
  } value;
};
static_assert(sizeof(NvmlFieldValue) == 40, "nvmlFieldValue_t layout");

struct Nvml {
  void* handle = nullptr;
  bool initialized = false;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*getCount)(unsigned*) = nullptr;
  NvmlReturn (*getHandleByIndex)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*getPciInfo)(NvmlDevice, NvmlPciInfo*) = nullptr;
  NvmlReturn (*getName)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*getCudaCc)(NvmlDevice, int*, int*) = nullptr;
  NvmlReturn (*getNvLinkState)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*getNvLinkCapability)(NvmlDevice, unsigned, unsigned, unsigned*) = nullptr;
  NvmlReturn (*getNvLinkRemotePci)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  NvmlReturn (*getNvLinkRemoteType)(NvmlDevice, unsigned, int*) = nullptr;   // optional
  NvmlReturn (*getFieldValues)(NvmlDevice, int, NvmlFieldValue*) = nullptr;  // optional
  ~Nvml() {
    if (initialized && shutdown) shutdown();
    if (handle) dlclose(handle);
  }
};

template <typename F>
bool bind(void* h, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(h, name));
  return *fn != nullptr;
}

bool linkActive(const Nvml& n, NvmlDevice dev, unsigned link, int sm) {
  if (sm >= 90 && n.getFieldValues) {
    NvmlFieldValue fv;
    std::memset(&fv, 0, sizeof(fv));
    fv.fieldId = kFieldNvlinkGetState;
    fv.scopeId = link;
    if (n.getFieldValues(dev, 1, &fv) == kNvmlSuccess && fv.nvmlReturn == kNvmlSuccess)
      return fv.value.uiVal == kNvmlFeatureEnabled;
  }
  int state = 0;
  return n.getNvLinkState(dev, link, &state) == kNvmlSuccess && state == kNvmlFeatureEnabled;
}

}  // namespace

bool probeNvml(std::vector<NvmlGpu>* out, Report* report) {
  report->name = "nvml";
  report->ran = true;
  out->clear();
  Nvml n;
  n.handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n.handle) {
    report->detail = "libnvidia-ml.so.1 not found";
    return false;
  }
  bool ok = (bind(n.handle, "nvmlInit_v2", &n.init) || bind(n.handle, "nvmlInit", &n.init)) &&
            bind(n.handle, "nvmlShutdown", &n.shutdown) &&
            (bind(n.handle, "nvmlDeviceGetCount_v2", &n.getCount) ||
             bind(n.handle, "nvmlDeviceGetCount", &n.getCount)) &&
            (bind(n.handle, "nvmlDeviceGetHandleByIndex_v2", &n.getHandleByIndex) ||
             bind(n.handle, "nvmlDeviceGetHandleByIndex", &n.getHandleByIndex)) &&
            bind(n.handle, "nvmlDeviceGetPciInfo_v3", &n.getPciInfo) &&
            bind(n.handle, "nvmlDeviceGetName", &n.getName) &&
            bind(n.handle, "nvmlDeviceGetCudaComputeCapability", &n.getCudaCc) &&
            bind(n.handle, "nvmlDeviceGetNvLinkState", &n.getNvLinkState) &&
            bind(n.handle, "nvmlDeviceGetNvLinkCapability", &n.getNvLinkCapability) &&
            (bind(n.handle, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &n.getNvLinkRemotePci) ||
             bind(n.handle, "nvmlDeviceGetNvLinkRemotePciInfo", &n.getNvLinkRemotePci));
  bind(n.handle, "nvmlDeviceGetNvLinkRemoteDeviceType", &n.getNvLinkRemoteType);
  bind(n.handle, "nvmlDeviceGetFieldValues", &n.getFieldValues);
  if (!ok) {
    report->detail = "libnvidia-ml.so.1 lacks an NVML entry point";
    return false;
  }
  report->available = true;
  NvmlReturn rc = n.init();
  if (rc != kNvmlSuccess) {
    report->detail = "nvmlInit failed (" + std::to_string(rc) + "): no NVIDIA driver";
    return false;
  }
  n.initialized = true;
  unsigned count = 0;
  if (n.getCount(&count) != kNvmlSuccess) count = 0;
  int links = 0;
  for (unsigned i = 0; i < count && i < 1024; ++i) {
    NvmlDevice dev = nullptr;
    if (n.getHandleByIndex(i, &dev) != kNvmlSuccess) continue;
    NvmlGpu g;
    g.index = static_cast<int>(i);
    NvmlPciInfo pci;
    std::memset(&pci, 0, sizeof(pci));
    if (n.getPciInfo(dev, &pci) == kNvmlSuccess) {
      pci.busId[sizeof(pci.busId) - 1] = '\0';
      g.busId = normalizeBusId(pci.busId);
    }
    char name[96] = {};
    if (n.getName(dev, name, sizeof(name)) == kNvmlSuccess) g.name = name;
    int major = 0, minor = 0;
    if (n.getCudaCc(dev, &major, &minor) == kNvmlSuccess) g.sm = major * 10 + minor;
    // NCCL's bound on links per generation.
    int maxLinks = g.sm < 0    ? 18
                   : g.sm < 60 ? 0
                   : g.sm < 70 ? 4
                   : g.sm < 80 ? 6
                   : g.sm < 90 ? 12
                               : 18;
    for (int l = 0; l < maxLinks; ++l) {
      unsigned p2p = 0;
      if (n.getNvLinkCapability(dev, l, kNvlinkCapP2pSupported, &p2p) != kNvmlSuccess || !p2p)
        continue;
      if (!linkActive(n, dev, l, g.sm)) continue;
      NvmlPciInfo remote;
      std::memset(&remote, 0, sizeof(remote));
      if (n.getNvLinkRemotePci(dev, l, &remote) != kNvmlSuccess) continue;
      remote.busId[sizeof(remote.busId) - 1] = '\0';
      NvLinkPeer peer;
      peer.link = l;
      peer.remoteBusId = normalizeBusId(remote.busId);
      int type = -1;
      if (n.getNvLinkRemoteType && n.getNvLinkRemoteType(dev, l, &type) == kNvmlSuccess)
        peer.remoteType = type == 0xff ? -1 : type;
      g.nvlinks.push_back(peer);
      ++links;
    }
    out->push_back(std::move(g));
  }
  report->detail =
      std::to_string(out->size()) + " GPU(s), " + std::to_string(links) + " active NVLink(s)";
  return true;
}

}  // namespace weft::topo::probe
