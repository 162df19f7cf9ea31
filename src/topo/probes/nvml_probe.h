// NVIDIA GPUs through NVML (libnvidia-ml.so.1, dlopen): index, PCI bus id, name, compute
// capability and the far end of every active NVLink (GPU, NVSwitch or CPU), like NCCL's
// ncclTopoGetXmlFromGpu.
#pragma once
#include <vector>

#include "src/topo/probes/probe.h"

namespace weft::topo::probe {

// Returns false when NVML is absent or does not initialise (no driver).
bool probeNvml(std::vector<NvmlGpu>* out, Report* report);

}  // namespace weft::topo::probe
