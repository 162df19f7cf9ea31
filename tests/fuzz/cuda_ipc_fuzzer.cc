// libFuzzer target for the CUDA IPC descriptor a peer reads from the bootstrap
// (cuda_ipc_check.h).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/cuda_ipc_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::checkCudaIpcInput(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
