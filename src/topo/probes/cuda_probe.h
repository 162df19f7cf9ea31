// CUDA devices through the driver API (libcuda.so.1, dlopen): ordinal, PCI bus id, name, compute
// capability and memory. Used when NVML is absent.
#pragma once
#include <vector>

#include "src/topo/probes/probe.h"

namespace weft::topo::probe {

// Returns false when libcuda is absent or cuInit fails (no driver or no device).
bool probeCuda(std::vector<CudaGpu>* out, Report* report);

}  // namespace weft::topo::probe
