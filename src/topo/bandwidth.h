// Link bandwidths and latencies of the topology model, in GB/s per direction and microseconds.
//
// Two rate tables: "nominal" (the hardware's per-direction signalling rate, what synthesis lower
// bounds are stated in) and "nccl" (the constants of NCCL's src/graph/topo.h, so a model can be
// compared with NCCL's own choices). They differ only for NVLink; PCIe, CPU interconnects and
// networks use NCCL's numbers in both.
#pragma once
#include <cstdint>
#include <string>

#include "src/topo/node_info.h"

namespace weft::topo {

struct LinkRates {
  std::string name = "nominal";
  // NVLink GB/s per link and direction, by GPU generation (sm): the vendor's nominal rate of
  // each NVLink generation, so that a synthesized plan is priced at what the hardware is rated
  // for; nccl() gives NCCL's lower model values instead. Both tables, with the generations and
  // link counts behind them: perf/README.md, "NVLink rates of the topology model".
  double nvlinkSm60 = 20.0;
  double nvlinkSm70 = 25.0;
  double nvlinkSm80 = 25.0;
  double nvlinkSm86 = 14.0625;
  double nvlinkSm90 = 25.0;
  double nvlinkSm100 = 50.0;
  double nvlinkUnknown = 25.0;  // sm not known: the most common generation's rate

  // Returns the rates named `name` ("nominal" or "nccl"); throws Error(kInvalidArgument) otherwise.
  static LinkRates byName(const std::string& name);
  static LinkRates nominal();
  static LinkRates nccl();

  double nvlinkPerLink(int sm) const;
};

// Bandwidth of a node to itself and of links that are not a bottleneck (NCCL's LOC_BW).
inline constexpr double kLocalBw = 5000.0;

// NCCL's PCIe model, so that Weft prices PCIe as NCCL does: an effective per-lane rate from the
// "link_speed" text (unknown text counts as 8 GT/s) times the width (0 or unknown: 16 lanes), in
// GB/s. The table of speeds: perf/README.md, "NVLink rates of the topology model".
double pcieBandwidth(const std::string& linkSpeed, int linkWidth);

// Bandwidth between two CPU sockets / NUMA domains of one host, after NCCL's topo.h: Intel
// Broadwell QPI 6, Skylake UPI 10, Sapphire Rapids 22, Emerald Rapids 40; AMD Zen1/2 16, Zen3/4
// 24, Zen5 32; POWER9 32; Arm 6; anything else 10.
double interCpuBandwidth(const CpuInfo& cpu);

// Network bandwidth from a speed in Mbit/s (NCCL: <= 0 means 10 Gbit/s).
double netBandwidth(int64_t speedMbps);

// Modelled per-hop latencies in microseconds, after NCCL's tuning.cc hardware latencies (LL):
// NVLink 0.6, PCIe 1.0, network 5.0 (or the net's own latency attribute).
inline constexpr double kNvLinkLatencyUs = 0.6;
inline constexpr double kPciLatencyUs = 1.0;
inline constexpr double kSysLatencyUs = 1.0;
inline constexpr double kNetLatencyUs = 5.0;

}  // namespace weft::topo
