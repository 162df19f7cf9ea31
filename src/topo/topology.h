// The topology graph: hosts, their CPUs (NUMA domains), PCI switches, GPUs, NICs and network
// ports, NVSwitches and the network fabric between hosts, joined by links with a kind, a
// bandwidth (GB/s per direction) and a latency. Paths between any two nodes follow NCCL's rules
// (src/graph/paths.cc): breadth-first, the widest of the shortest routes, GPUs relay only one
// NVLink hop (NVB), and the path type is the worst hop (LOC < NVL < NVB < C2C < PIX < PXB < PHB <
// SYS < NET).
//
// The node/attribute model mirrors NCCL's topology XML so a graph round-trips through it:
// every field NCCL reads has a typed home, unknown attributes and elements are kept verbatim.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/topo/bandwidth.h"
#include "src/topo/node_info.h"

namespace weft::topo {

enum class NodeKind : uint8_t {
  kHost,       // one machine; the root of its nodes (no links)
  kCpu,        // a NUMA domain (NCCL's CPU node)
  kPciSwitch,  // a PCI bridge / switch (or a PCI function of a class NCCL treats like one)
  kGpu,
  kNic,        // a network adapter (PCI device or virtual), parent of its ports
  kNet,        // a network port / device as the network plugin sees it (NCCL's NET node)
  kNvSwitch,   // all NVSwitch chips of a host, as one non-blocking switch (like NCCL)
  kNetSwitch,  // the network fabric between hosts, one per link layer
};
inline constexpr int kNodeKindCount = 8;
const char* nodeKindName(NodeKind k);

enum class LinkKind : uint8_t { kLoc, kNvLink, kC2c, kPci, kSys, kNet };
const char* linkKindName(LinkKind k);

enum class PathType : uint8_t { kLoc, kNvl, kNvb, kC2c, kPix, kPxb, kPhb, kSys, kNet, kDis };
const char* pathTypeName(PathType t);

using Attrs = std::vector<std::pair<std::string, std::string>>;

struct Node {
  NodeKind kind = NodeKind::kCpu;
  int host = 0;
  int parent = -1;  // containing node: cpu -> host, pci/gpu/nic -> cpu or pci, net -> nic
  PciInfo pci;      // pci switch, gpu, nic (when on PCI)
  CpuInfo cpu;
  GpuInfo gpu;
  NetInfo net;
  // XML attributes not interpreted, kept for the writer: those of the node's own element, and
  // those of the inner <gpu> / <nic> element of a GPU or NIC (a host: of its <weft_host>).
  Attrs extra;
  Attrs innerExtra;
  // Child XML elements not interpreted, kept verbatim: (container, xml) where container is ""
  // for the node's own element, or "gpu" / "nic" for the element inside its <pci>.
  std::vector<std::pair<std::string, std::string>> opaque;
  bool completed = false;  // made up while completing a partial description (not compared)
};

// One <nvlink>/<c2c> declaration folded into a link (GPU -> NVSwitch links keep one per chip).
struct LinkPart {
  std::string target;  // bus id of the far end
  std::string tclass;  // its PCI class
  int count = 0;
  bool operator==(const LinkPart&) const = default;
};

struct Link {
  int a = -1, b = -1;
  LinkKind kind = LinkKind::kPci;
  double bw = 0;  // GB/s per direction (links are full duplex)
  double latencyUs = 0;
  int count = 0;  // NVLink / C2C lanes; 0 for other kinds
  std::vector<LinkPart> parts;
  bool derived = false;  // added by finalize(): CPU interconnect, network fabric
  int other(int node) const { return node == a ? b : a; }
};

struct CacheInfo {
  int level = 0;
  std::string type;  // "unified", "data", "instruction"
  int64_t sizeBytes = 0;
  int count = 0;
  bool operator==(const CacheInfo&) const = default;
};

struct PciDevice {
  std::string busId, classCode, vendor, device, name;
  int numaId = -1;
  bool operator==(const PciDevice&) const = default;
};

// Per-host facts that are not graph nodes (Weft extension <weft_host> in the XML).
struct HostInfo {
  uint64_t hostHash = 0;  // 0: unknown (single-host descriptions)
  std::string hostname;
  int packages = 0, numaNodes = 0, cores = 0, pus = 0;
  int64_t memoryBytes = 0;
  std::string cpuModel;
  std::vector<CacheInfo> caches;
  std::vector<PciDevice> pciDevices;  // every PCI function hwloc saw
  bool operator==(const HostInfo&) const = default;
};

struct PathOptions {
  bool gpuRelay = true;  // allow one intermediate GPU over NVLink (NCCL's NVB; NCCL_NVB_DISABLE)
};

struct Path {
  PathType type = PathType::kDis;
  double bw = 0;  // bottleneck GB/s
  int hops = 0;
  double latencyUs = 0;
  std::vector<int> nodes;  // from ... to, inclusive
  bool connected() const { return type != PathType::kDis; }
};

class Topology {
 public:
  explicit Topology(LinkRates rates = LinkRates::nominal());

  const LinkRates& rates() const { return rates_; }

  // Adds a host and its kHost node; returns the host index.
  int addHost(HostInfo info);
  // Adds a node (its host must exist); returns its index.
  int addNode(Node node);
  // Adds a link; returns its index. Throws on a bad node index.
  int addLink(Link link);
  // Adds `node` and the link of `kind` joining it to node.parent; returns the node's index. A
  // network link runs from the NIC to its port (a = the parent), every other link from the node
  // to its parent (a = the node).
  int addChildNode(Node node, LinkKind kind, double bw, double latencyUs = 0);
  // Index of the link between a and b of `kind` (either direction), or -1.
  int findLink(int a, int b, LinkKind kind) const;
  Link& mutableLink(int i) { return links_.at(i); }
  Node& mutableNode(int i) { return nodes_.at(i); }
  HostInfo& mutableHost(int h) { return hosts_.at(h); }

  // Replaces the derived links: every pair of CPUs of a host gets a SYS link, and when there is
  // more than one host, every network port joins a fabric switch of its link layer. Call after
  // building; readers and probes do.
  void finalize();

  // Appends host `host` of `src` (its nodes and non-derived links) as a new host; returns its
  // index. Call finalize() afterwards.
  int appendHost(const Topology& src, int host);

  int hostCount() const { return static_cast<int>(hosts_.size()); }
  const HostInfo& host(int h) const { return hosts_.at(h); }
  int hostNode(int h) const { return hostNodes_.at(h); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int i) const { return nodes_.at(i); }
  const std::vector<Link>& links() const { return links_; }
  const Link& link(int i) const { return links_.at(i); }
  // Link indices at node i.
  const std::vector<int>& linksAt(int i) const { return adjacency_.at(i); }
  // Nodes whose parent is i, in index order.
  const std::vector<int>& children(int i) const { return children_.at(i); }

  // Nodes of `kind` (on `host`, or on all hosts when host < 0), in index order.
  std::vector<int> find(NodeKind kind, int host = -1) const;
  int count(NodeKind kind, int host = -1) const;
  int countLinks(LinkKind kind) const;
  int findCpu(int host, int numaId) const;
  int findGpu(int host, int dev) const;
  int findBusId(int host, const std::string& busId) const;  // pci switch, gpu or nic
  int findNet(int host, const std::string& name) const;
  int findNvSwitch(int host) const;

  // Short unique label ("gpu3", "cpu1", "pci 0000:03:00.0", "h1/net mlx5_0").
  std::string label(int node) const;

  // The path from `from` to `to` (NCCL's rules, see the top of this file).
  Path path(int from, int to, const PathOptions& options = {}) const;
  // Paths from `from` to every node (index = destination).
  std::vector<Path> pathsFrom(int from, const PathOptions& options = {}) const;

  // Empty when the two graphs are the same (hosts, nodes in order with their attributes, links as
  // a set with kinds, bandwidths and counts); else a description of the first difference.
  std::string diff(const Topology& other) const;

 private:
  void rebuildAdjacency();

  LinkRates rates_;
  std::vector<HostInfo> hosts_;
  std::vector<int> hostNodes_;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<std::vector<int>> adjacency_;
  std::vector<std::vector<int>> children_;
};

// "0000:06:00.0" from "00000000:06:00.0", "0000:06:00.0", "6:0.0"...; lower case; the input
// lower-cased when it is not a bus id (e.g. NVML's "fffffff:ffff:ff" placeholder).
std::string normalizeBusId(const std::string& busId);

// PCI class helpers on NCCL's class text ("0x030200"): GPU = 0x03xxxx, NIC = 0x02xxxx,
// InfiniBand = 0x0207xx, NVSwitch = 0x068000, CPU (NVLink to a POWER CPU) = 0x068001.
bool isGpuClass(const std::string& cls);
bool isNicClass(const std::string& cls);
bool isInfinibandClass(const std::string& cls);
bool isNvSwitchClass(const std::string& cls);
bool isCpuClass(const std::string& cls);

}  // namespace weft::topo
