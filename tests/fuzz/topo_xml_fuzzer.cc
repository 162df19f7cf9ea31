// libFuzzer target for the NCCL topology XML reader (and, through the round trip, the writer,
// paths and renderers). Built with -DWEFT_BUILD_FUZZERS=ON under clang.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/topo_xml_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::checkTopologyXml(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
