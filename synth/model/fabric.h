// The Fabric: what synthesis and the cost model see of a Topology. Ranks are nodes 0..nranks-1
// (GPUs, or host ranks on machines without GPUs); the switches, CPUs, PCI bridges, NICs and
// network fabric their traffic crosses are further nodes. Every full-duplex topology link becomes
// two directed links with the same bandwidth, so contention is modelled per direction. Traffic
// from rank a to rank b follows routes[a][b] (the topology's path: NCCL's rules).
#pragma once
#include <string>
#include <vector>

#include "src/topo/topology.h"

namespace weft::synth {

struct FabricLink {
  int from = -1, to = -1;  // fabric nodes
  double bw = 0;           // GB/s in this direction
  double latencyUs = 0;
  topo::LinkKind kind = topo::LinkKind::kPci;
};

struct FabricNode {
  std::string name;  // "gpu3", "h1/gpu0", "nvswitch", "cpu0", "rank2" ...
  topo::NodeKind kind = topo::NodeKind::kGpu;
  int host = 0;
  int topoNode = -1;  // index in the source Topology; -1 for made-up nodes
};

struct Fabric {
  int nranks = 0;
  std::vector<FabricNode> nodes;  // ranks first
  std::vector<FabricLink> links;  // directed
  std::vector<int> hostOf;        // per rank: host index
  // routes[a][b]: the directed links from rank a to rank b in order (empty when a == b).
  std::vector<std::vector<std::vector<int>>> routes;

  int nodeCount() const { return static_cast<int>(nodes.size()); }
  // Directed links leaving / entering node v.
  std::vector<int> outLinks(int v) const;
  std::vector<int> inLinks(int v) const;
  // Directed link from u to v, or -1.
  int findLink(int u, int v) const;
  // Bottleneck bandwidth and summed latency of the route a -> b.
  double routeBw(int a, int b) const;
  double routeLatencyUs(int a, int b) const;
  std::string describe() const;  // one line per node and link, for tools and test messages
};

struct FabricOptions {
  // GPUs that are ranks, as indices into topology.find(kGpu) (rank i = gpus[i]); empty = all
  // GPUs in index order (host by host).
  std::vector<int> gpus;
  // Machines without GPUs: ranks per host, each attached to its host's first CPU node by a link
  // of `hostRankBw` GB/s (the rank's share of memory bandwidth) and `hostRankLatencyUs`.
  int hostRanksPerHost = 2;
  double hostRankBw = 10.0;
  double hostRankLatencyUs = 0.5;
  // Allow routes that relay through one GPU over NVLink (NCCL's NVB).
  bool gpuRelay = true;
  // Also add every topology link that no route takes (a second NIC behind a PCIe switch, links
  // between switches), except links of GPUs that are not ranks: the whole physical capacity, as
  // lower bounds and packing-style synthesis want it. Routes are the same either way.
  bool allLinks = false;
};

// Builds the fabric of `topology`. Throws weft::Error(kInvalidArgument) on a bad GPU index, or
// when two ranks have no route.
Fabric fabricFromTopology(const topo::Topology& topology, const FabricOptions& options = {});

// A fabric where every pair of ranks has a direct link of `bw` GB/s and `latencyUs` (tests).
Fabric fullyConnectedFabric(int nranks, double bw, double latencyUs = 1.0);

}  // namespace weft::synth
