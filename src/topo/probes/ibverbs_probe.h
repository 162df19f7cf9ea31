// InfiniBand / RoCE adapters through libibverbs, loaded with dlopen (never linked): devices, their
// PCI bus ids, ports with state, link layer, rate and GID.
#pragma once
#include <string>
#include <vector>

#include "src/topo/probes/probe.h"

namespace weft::topo::probe {

// Returns false when libibverbs is absent or fails; an empty device list is success.
bool probeIbverbs(const std::string& sysfsRoot, std::vector<IbDevice>* out, Report* report);

// Port rate in Mbit/s from ibv_port_attr's active_speed / active_width codes (NCCL's table:
// SDR 2.5 ... HDR 50, NDR 100, XDR 200 Gbit/s per lane; 1x, 4x, 8x, 12x, 2x lanes).
int64_t ibPortSpeedMbps(int activeSpeed, int activeWidth, int* lanes = nullptr);

}  // namespace weft::topo::probe
