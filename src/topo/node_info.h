// What the topology model knows of one node besides its place in the graph: the PCI function,
// NUMA domain, GPU and network port attributes, after the fields of NCCL's topology XML.
#pragma once
#include <cstdint>
#include <string>

namespace weft::topo {

struct PciInfo {
  std::string busId;      // lower case, as written ("0000:06:00.0")
  std::string classCode;  // "0x030200"
  std::string vendor, device, subsystemVendor, subsystemDevice;  // "0x10de"; empty: unknown
  std::string linkSpeed;                                         // "8.0 GT/s PCIe"; empty: unknown
  int linkWidth = 0;                                             // lanes; 0: unknown
  bool operator==(const PciInfo&) const = default;
};

struct CpuInfo {
  int numaId = -1;
  std::string affinity;  // NCCL cpumask: 32-bit hex words, most significant first
  std::string arch, vendor;
  int familyId = -1, modelId = -1;
  int cores = 0, pus = 0;  // Weft extension (0: unknown)
  bool operator==(const CpuInfo&) const = default;
};

struct GpuInfo {
  int dev = -1;  // NVML index
  int sm = -1;   // compute capability, major*10+minor
  int rank = -1;
  int gdr = -1;
  std::string name;  // Weft extension ("NVIDIA H100 80GB HBM3")
  bool operator==(const GpuInfo&) const = default;
};

struct NetInfo {
  std::string name;  // "mlx5_0", "eth0"
  int dev = -1;
  int64_t speedMbps = -1;  // -1: absent
  int port = -1;
  double latency = -1;  // as NCCL's "latency" attribute; -1: absent
  std::string guid;
  int maxConn = -1, gdr = -1, coll = -1;
  std::string linkLayer;  // Weft extension: "IB", "Ethernet"
  std::string gid;        // Weft extension
  bool operator==(const NetInfo&) const = default;
};

}  // namespace weft::topo
