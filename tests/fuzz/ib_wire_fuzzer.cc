// libFuzzer target for what an ib connection reads from its peer: the setup message, data
// immediates and control bytes (ib_wire_check.h).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/ib_wire_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::checkIbInput(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
