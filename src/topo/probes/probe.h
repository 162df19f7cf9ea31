// What the hardware probes find, before it becomes a graph. Each probe is optional: a missing
// library or device gives a Report with available = false and a reason, never an error.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/topo/topology.h"

namespace weft::topo::probe {

struct Report {
  std::string name;        // "hwloc", "sysfs-net", "ibverbs", "nvml", "cuda"
  bool ran = false;        // the probe was enabled
  bool available = false;  // its library / source was there
  std::string detail;      // "2 HCAs", "libnvidia-ml.so.1 not found", ...
};

struct NumaDomain {
  int os = -1;
  std::vector<int> pus;  // OS indexes of its processing units
  int cores = 0;
  int64_t memoryBytes = 0;
};

struct PciFunction {
  PciInfo info;             // bus id, class, ids, link speed/width
  std::string parentBusId;  // upstream PCI bridge; empty: attached to the root complex
  int numa = -1;            // NUMA domain of the root complex, -1 unknown
  bool bridge = false;
  std::string name;  // hwloc's description when known
};

struct HwlocResult {
  HostInfo host;  // packages, cores, PUs, caches, memory, PCI device list (hash/hostname not set)
  std::vector<NumaDomain> numas;
  std::vector<PciFunction> pci;  // every PCI function and PCI-to-PCI bridge
  std::string arch, vendor;      // "x86_64", "GenuineIntel"
  int familyId = -1, modelId = -1;
};

struct NetInterface {
  std::string name;
  std::string busId;  // PCI device behind it; empty for virtual interfaces
  std::string classCode;
  int numa = -1;
  int64_t speedMbps = -1;  // -1: unknown (virtio, link down)
  std::string linkLayer;   // "Ethernet", "IB", "other"
  int mtu = 0;
  std::string address;
  std::string operstate;
  bool up = false;
  bool loopback = false;
};

struct IbPort {
  int port = 0;
  int state = 0;  // IBV_PORT_ACTIVE = 4
  int64_t speedMbps = 0;
  int width = 0;          // lanes
  std::string linkLayer;  // "IB", "Ethernet" (RoCE)
  std::string gid;        // GID index 0, "fe80:0000:..."
  int lid = 0;
  int activeMtu = 0;  // bytes
};

struct IbDevice {
  std::string name;   // "mlx5_0"
  std::string busId;  // from /sys/class/infiniband/<name>/device
  std::string classCode;
  int numa = -1;
  std::string guid;  // node GUID, "0x..."
  std::vector<IbPort> ports;
};

struct NvLinkPeer {
  int link = 0;
  std::string remoteBusId;
  int remoteType = -1;  // NVML: 0 GPU, 1 IBM NPU (CPU), 2 NVSwitch; -1 unknown
};

struct NvmlGpu {
  int index = -1;
  std::string busId;
  std::string name;
  int sm = -1;
  std::vector<NvLinkPeer> nvlinks;  // active links that support P2P
};

struct CudaGpu {
  int ordinal = -1;
  std::string busId;
  std::string name;
  int sm = -1;
  int64_t memoryBytes = 0;
};

// Small sysfs helpers shared by the probes (paths are relative to a sysfs root so tests can use
// a fake tree).
std::string readFirstLine(const std::string& path);  // trimmed; "" when unreadable
// The last "dddd:bb:dd.f" component of a resolved sysfs device path, or "".
std::string busIdFromDevicePath(const std::string& path);
// NCCL's cpumask text for a set of CPU indexes: 32-bit hex words, most significant first.
std::string cpuMaskText(const std::vector<int>& cpus);
// Parses NCCL / sysfs cpumask text back to CPU indexes.
std::vector<int> parseCpuMask(const std::string& text);

}  // namespace weft::topo::probe
