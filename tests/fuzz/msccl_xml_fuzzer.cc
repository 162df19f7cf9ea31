// libFuzzer target for the MSCCL XML importer (and, through the round trip, the exporter,
// instantiate and the verifier). Built with -DWEFT_BUILD_FUZZERS=ON under clang.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/msccl_xml_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::checkMscclXml(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
