// hwloc probe: packages, NUMA domains, cores, PUs, caches, memory and the PCI tree.
#pragma once
#include <string>

#include "src/topo/probes/probe.h"

namespace weft::topo::probe {

struct HwlocOptions {
  std::string synthetic;  // hwloc synthetic description ("pack:2 numa:1 core:4 pu:2") for tests
  std::string xmlFile;    // an lstopo XML export instead of this machine
  std::string sysfsRoot = "/sys";  // PCI class and link speed files
};

// Fills `out`; returns false (and says why in `report`) when hwloc cannot load a topology.
bool probeHwloc(const HwlocOptions& options, HwlocResult* out, Report* report);

// CPU vendor / family / model of this machine from cpuid (x86), like NCCL; empty elsewhere.
void cpuIdentity(std::string* arch, std::string* vendor, int* familyId, int* modelId);

}  // namespace weft::topo::probe
