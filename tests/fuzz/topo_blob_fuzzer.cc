// libFuzzer target for the topology exchange of communicator init: rank blobs (header + NCCL
// XML) separated by "\n--rank--\n" in one input.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/topo_blob_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::checkTopologyBlobs(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
