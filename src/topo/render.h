// Human-readable views of a Topology: an indented tree with link bandwidths, a path matrix between
// GPUs and network ports (like `nvidia-smi topo -m`), one-line host descriptions, Graphviz dot.
#pragma once
#include <string>

#include "src/topo/topology.h"

namespace weft::topo {

std::string formatBandwidth(double gbPerSecond);  // "12 GB/s", "12.5 GB/s", "5000 GB/s"
std::string formatBytes(int64_t bytes);           // "32 KiB", "24 GiB"

// "dgx1: 2 packages, 40 cores, 80 PUs, 2 NUMA, 512 GiB; 8 GPUs (sm70, 6 NVLinks each); 4 NICs
// (mlx5_0 IB 100 Gb/s, ...)"
std::string describeHost(const Topology& topology, int host);

std::string renderTree(const Topology& topology);
// Path type and bandwidth between every pair of GPUs and network ports (at most `limit` each).
std::string renderMatrix(const Topology& topology, const PathOptions& options = {}, int limit = 32);
std::string renderDot(const Topology& topology);

}  // namespace weft::topo
