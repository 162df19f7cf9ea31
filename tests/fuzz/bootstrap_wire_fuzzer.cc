// libFuzzer target for the bytes the bootstrap reads off its root port, its rank ports and the
// unique id (bootstrap_wire_check.h). Built with -DWEFT_BUILD_FUZZERS=ON under clang.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/bootstrap_wire_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::checkBootstrapBytes(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
