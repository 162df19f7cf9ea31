// A rank's GPU as init records it: which GPU (ordinal and PCI bus id). Whether the ranks' GPUs
// reach each other's memory is the device path's to find out (src/cuda/gpu_path.h).
#pragma once
#include <string>

namespace weft::core {
struct CommConfig;
}

namespace weft::cuda {

using core::CommConfig;

// Records in `cfg` the GPU of the rank being created: `ordinal` (ncclCommInitAll's devlist
// entry), or with -2 the device whose context is current on the calling thread, as NCCL takes
// it. Leaves none where there is no driver or no current context; asks nothing that would create
// CUDA state (no cuInit).
void noteCudaDevice(CommConfig* cfg, int ordinal);

}  // namespace weft::cuda
