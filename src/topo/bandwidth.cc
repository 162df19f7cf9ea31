#include "src/topo/bandwidth.h"

#include <cstdlib>
#include <cstring>

#include "src/common/error.h"

namespace weft::topo {

LinkRates LinkRates::nominal() { return LinkRates{}; }

LinkRates LinkRates::nccl() {
  LinkRates r;
  r.name = "nccl";
  // NVIDIA/nccl src/graph/topo.h: SM60_NVLINK_BW 18, SM70 20, SM80 20, SM86 12, SM90 20.6,
  // SM100 40.1; unknown sm falls back to SM80.
  r.nvlinkSm60 = 18.0;
  r.nvlinkSm70 = 20.0;
  r.nvlinkSm80 = 20.0;
  r.nvlinkSm86 = 12.0;
  r.nvlinkSm90 = 20.6;
  r.nvlinkSm100 = 40.1;
  r.nvlinkUnknown = 20.0;
  return r;
}

LinkRates LinkRates::byName(const std::string& name) {
  if (name.empty() || name == "nominal") return nominal();
  if (name == "nccl") return nccl();
  fail(Status::kInvalidArgument,
       "unknown topology rate table '" + name + "' (expected 'nominal' or 'nccl')");
}

double LinkRates::nvlinkPerLink(int sm) const {
  if (sm < 0) return nvlinkUnknown;
  if (sm >= 100) return nvlinkSm100;
  if (sm >= 90) return nvlinkSm90;
  if (sm == 86) return nvlinkSm86;
  if (sm >= 80) return nvlinkSm80;
  if (sm >= 70) return nvlinkSm70;
  if (sm >= 60) return nvlinkSm60;
  return nvlinkUnknown;
}

double pcieBandwidth(const std::string& linkSpeed, int linkWidth) {
  // NCCL's kvDictPciGen, in 100 Mbit/s per lane: 2.5 GT/s -> 15, 5 -> 30, 8 -> 60, 16 -> 120,
  // 32 -> 240, 64 -> 480; anything else -> 60. Accepts "16 GT/s" and "16.0 GT/s PCIe" alike.
  double perLane = 60;
  const char* s = linkSpeed.c_str();
  char* end = nullptr;
  double gt = std::strtod(s, &end);
  if (end != s && std::strstr(end, "GT/s")) {
    if (gt == 2.5)
      perLane = 15;
    else if (gt == 5.0)
      perLane = 30;
    else if (gt == 8.0)
      perLane = 60;
    else if (gt == 16.0)
      perLane = 120;
    else if (gt == 32.0)
      perLane = 240;
    else if (gt == 64.0)
      perLane = 480;
  }
  int width = linkWidth > 0 ? linkWidth : 16;
  return width * perLane / 80.0;
}

double interCpuBandwidth(const CpuInfo& cpu) {
  if (cpu.arch == "ppc64") return 32.0;                          // P9_BW
  if (cpu.arch == "arm64" || cpu.arch == "aarch64") return 6.0;  // ARM_BW
  if (cpu.vendor == "GenuineIntel") {
    int f = cpu.familyId, m = cpu.modelId;
    if (f == 6 && (m >= 0xCF || m == 0xAD || m == 0xAE || m == 0xAF)) return 40.0;  // ERP
    if (f == 6 && m >= 0x8F) return 22.0;                                           // SRP
    if (f == 6 && m >= 0x55) return 10.0;                                           // SKL
    return 6.0;                                                                     // BDW
  }
  if (cpu.vendor == "AuthenticAMD") {
    int f = cpu.familyId;
    if (f == 26 || f == 0xBF) return 32.0;  // Zen5
    if (f == 25 || f == 0xAF) return 24.0;  // Zen3/4
    return 16.0;                            // Zen1/2
  }
  if (cpu.vendor == "CentaurHauls" || cpu.vendor == "  Shanghai  ") return 6.0;  // ZPI
  return 10.0;
}

double netBandwidth(int64_t speedMbps) {
  if (speedMbps <= 0) speedMbps = 10000;
  return static_cast<double>(speedMbps) / 8000.0;
}

}  // namespace weft::topo
