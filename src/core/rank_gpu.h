// A rank's GPU as init records it and the ranks compare it: which GPU (ordinal and PCI bus id)
// and whether one GPU can store into another's memory.
#pragma once
#include <string>

namespace weft::core {

struct CommConfig;

// Records in `cfg` the GPU of the rank being created: `ordinal` (ncclCommInitAll's devlist
// entry), or with -2 the device whose context is current on the calling thread, as NCCL takes
// it. Leaves none where there is no driver or no current context; asks nothing that would create
// CUDA state (no cuInit).
void noteCudaDevice(CommConfig* cfg, int ordinal);

// Whether GPU `ordinal` (bus id `mine`) can store into the memory of the GPU at bus id `theirs`:
// the same GPU, or peer access between them.
bool gpuReaches(int ordinal, const std::string& mine, const std::string& theirs);

}  // namespace weft::core
