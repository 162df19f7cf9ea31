// Network interfaces from sysfs (<root>/class/net): speed, link layer, MTU, state, the PCI device
// behind each and its NUMA domain.
#pragma once
#include <string>
#include <vector>

#include "src/topo/probes/probe.h"

namespace weft::topo::probe {

// Every interface under <sysfsRoot>/class/net, loopback and down ones included (flagged), sorted
// by name. Returns false when the directory cannot be read.
bool probeSysfsNet(const std::string& sysfsRoot, std::vector<NetInterface>* out, Report* report);

}  // namespace weft::topo::probe
