#include "src/topo/probes/ibverbs_probe.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <strings.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft::topo::probe {
namespace {

// The parts of libibverbs 1.x's ABI (rdma-core <infiniband/verbs.h>) this probe touches. Devices
// and contexts stay opaque; the attribute structs are copied field for field.
struct IbvDevice;
struct IbvContext;

union IbvGid {
  uint8_t raw[16];
  struct {
    uint64_t subnetPrefix;
    uint64_t interfaceId;
  } global;
};

struct IbvDeviceAttr {
  char fwVer[64];
  uint64_t nodeGuid;
  uint64_t sysImageGuid;
  uint64_t maxMrSize;
  uint64_t pageSizeCap;
  uint32_t vendorId;
  uint32_t vendorPartId;
  uint32_t hwVer;
  int maxQp, maxQpWr;
  unsigned int deviceCapFlags;
  int maxSge, maxSgeRd, maxCq, maxCqe, maxMr, maxPd, maxQpRdAtom, maxEeRdAtom, maxResRdAtom,
      maxQpInitRdAtom, maxEeInitRdAtom;
  int atomicCap;  // enum ibv_atomic_cap
  int maxEe, maxRdd, maxMw, maxRawIpv6Qp, maxRawEthyQp, maxMcastGrp, maxMcastQpAttach,
      maxTotalMcastQpAttach, maxAh, maxFmr, maxMapPerFmr, maxSrq, maxSrqWr, maxSrqSge;
  uint16_t maxPkeys;
  uint8_t localCaAckDelay;
  uint8_t physPortCnt;
};

struct IbvPortAttr {
  int state;      // enum ibv_port_state
  int maxMtu;     // enum ibv_mtu
  int activeMtu;  // enum ibv_mtu
  int gidTblLen;
  uint32_t portCapFlags;
  uint32_t maxMsgSz;
  uint32_t badPkeyCntr;
  uint32_t qkeyViolCntr;
  uint16_t pkeyTblLen;
  uint16_t lid;
  uint16_t smLid;
  uint8_t lmc;
  uint8_t maxVlNum;
  uint8_t smSl;
  uint8_t subnetTimeout;
  uint8_t initTypeReply;
  uint8_t activeWidth;
  uint8_t activeSpeed;
  uint8_t physState;
  uint8_t linkLayer;  // IBV_LINK_LAYER_UNSPECIFIED 0, INFINIBAND 1, ETHERNET 2
  uint8_t flags;
  uint16_t portCapFlags2;
};
static_assert(sizeof(IbvPortAttr) == 52, "ibv_port_attr layout");
static_assert(offsetof(IbvDeviceAttr, physPortCnt) == 227, "ibv_device_attr layout");
static_assert(offsetof(IbvPortAttr, activeSpeed) == 44 && offsetof(IbvPortAttr, linkLayer) == 46,
              "ibv_port_attr layout");

constexpr int kIbvPortActive = 4;

struct Verbs {
  void* handle = nullptr;
  IbvDevice** (*getDeviceList)(int*) = nullptr;
  void (*freeDeviceList)(IbvDevice**) = nullptr;
  const char* (*getDeviceName)(IbvDevice*) = nullptr;
  IbvContext* (*openDevice)(IbvDevice*) = nullptr;
  int (*closeDevice)(IbvContext*) = nullptr;
  int (*queryDevice)(IbvContext*, IbvDeviceAttr*) = nullptr;
  int (*queryPort)(IbvContext*, uint8_t, IbvPortAttr*) = nullptr;
  int (*queryGid)(IbvContext*, uint8_t, int, IbvGid*) = nullptr;
  ~Verbs() {
    if (handle) dlclose(handle);
  }
};

template <typename F>
bool bind(void* h, const char* name, F* fn) {
  void* p = dlvsym(h, name, "IBVERBS_1.1");
  if (!p) p = dlsym(h, name);
  *fn = reinterpret_cast<F>(p);
  return p != nullptr;
}

std::string gidText(const IbvGid& g) {
  char buf[48];
  std::snprintf(buf, sizeof(buf),
                "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", g.raw[0],
                g.raw[1], g.raw[2], g.raw[3], g.raw[4], g.raw[5], g.raw[6], g.raw[7], g.raw[8],
                g.raw[9], g.raw[10], g.raw[11], g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
  return buf;
}

}  // namespace

int64_t ibPortSpeedMbps(int activeSpeed, int activeWidth, int* lanes) {
  static const int kSpeeds[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};
  static const int kWidths[] = {1, 4, 8, 12, 2};
  int s = ffs(activeSpeed) - 1, w = ffs(activeWidth) - 1;
  int64_t speed = s >= 0 && s < 9 ? kSpeeds[s] : kSpeeds[0];
  int width = w >= 0 && w < 5 ? kWidths[w] : 1;
  if (lanes) *lanes = width;
  return speed * width;
}

bool probeIbverbs(const std::string& sysfsRoot, std::vector<IbDevice>* out, Report* report) {
  report->name = "ibverbs";
  report->ran = true;
  out->clear();
  Verbs v;
  v.handle = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!v.handle) v.handle = dlopen("libibverbs.so", RTLD_NOW | RTLD_LOCAL);
  if (!v.handle) {
    report->detail = "libibverbs.so.1 not found";
    return false;
  }
  report->available = true;
  bool ok = bind(v.handle, "ibv_get_device_list", &v.getDeviceList) &&
            bind(v.handle, "ibv_free_device_list", &v.freeDeviceList) &&
            bind(v.handle, "ibv_get_device_name", &v.getDeviceName) &&
            bind(v.handle, "ibv_open_device", &v.openDevice) &&
            bind(v.handle, "ibv_close_device", &v.closeDevice) &&
            bind(v.handle, "ibv_query_device", &v.queryDevice) &&
            bind(v.handle, "ibv_query_port", &v.queryPort) &&
            bind(v.handle, "ibv_query_gid", &v.queryGid);
  if (!ok) {
    report->detail = "libibverbs lacks a verbs entry point";
    return false;
  }
  int n = 0;
  IbvDevice** list = v.getDeviceList(&n);
  if (!list) {
    report->detail = "ibv_get_device_list failed (no RDMA devices)";
    return true;
  }
  for (int i = 0; i < n; ++i) {
    IbDevice dev;
    const char* name = v.getDeviceName(list[i]);
    dev.name = name ? name : "";
    std::string sys = sysfsRoot + "/class/infiniband/" + dev.name + "/device";
    char resolved[PATH_MAX];
    if (!dev.name.empty() && realpath(sys.c_str(), resolved)) {
      dev.busId = busIdFromDevicePath(resolved);
      dev.classCode = readFirstLine(std::string(resolved) + "/class");
      std::string numa = readFirstLine(std::string(resolved) + "/numa_node");
      if (!numa.empty()) dev.numa = std::atoi(numa.c_str());
    }
    IbvContext* ctx = v.openDevice(list[i]);
    if (!ctx) {
      out->push_back(std::move(dev));
      continue;
    }
    IbvDeviceAttr attr;
    std::memset(&attr, 0, sizeof(attr));
    if (v.queryDevice(ctx, &attr) == 0) {
      uint64_t g = __builtin_bswap64(attr.nodeGuid);  // big endian on the wire
      char buf[32];
      std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(g));
      dev.guid = buf;
      for (int p = 1; p <= attr.physPortCnt; ++p) {
        // Room beyond the declared struct: newer libraries may write more fields.
        union {
          IbvPortAttr a;
          char pad[512];
        } pa;
        std::memset(&pa, 0, sizeof(pa));
        if (v.queryPort(ctx, static_cast<uint8_t>(p), &pa.a) != 0) continue;
        IbPort port;
        port.port = p;
        port.state = pa.a.state;
        port.speedMbps = ibPortSpeedMbps(pa.a.activeSpeed, pa.a.activeWidth, &port.width);
        port.linkLayer = pa.a.linkLayer == 2 ? "Ethernet" : "IB";
        port.lid = pa.a.lid;
        port.activeMtu = pa.a.activeMtu >= 1 && pa.a.activeMtu <= 5 ? 128 << pa.a.activeMtu : 0;
        IbvGid gid;
        std::memset(&gid, 0, sizeof(gid));
        if (v.queryGid(ctx, static_cast<uint8_t>(p), 0, &gid) == 0) port.gid = gidText(gid);
        dev.ports.push_back(std::move(port));
      }
    }
    v.closeDevice(ctx);
    out->push_back(std::move(dev));
  }
  v.freeDeviceList(list);
  int active = 0;
  for (const auto& d : *out)
    for (const auto& p : d.ports) active += p.state == kIbvPortActive;
  report->detail =
      n == 0 ? "no RDMA devices"
             : std::to_string(n) + " device(s), " + std::to_string(active) + " active port(s)";
  return true;
}

}  // namespace weft::topo::probe
