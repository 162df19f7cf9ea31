// libFuzzer target for what an shm rank reads from its peer: message descriptors, FIFO geometry
// and /dev/shm segment names (shm_descriptor_check.h).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/shm_descriptor_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::checkShmInput(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
