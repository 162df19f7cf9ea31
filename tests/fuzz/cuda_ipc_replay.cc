// Runs the CUDA IPC descriptor property (cuda_ipc_check.h) over generated seeds - a cuMem and a
// legacy descriptor - and deterministic malformed variants (every truncation, every bit flip,
// hostile sizes and offsets), so the malformed-input coverage runs in every build. The seeds must
// be accepted and the hostile inputs refused. `--emit DIR` writes the seeds for libFuzzer.
#include <string>
#include <vector>

#include "tests/fuzz/cuda_ipc_check.h"
#include "tests/fuzz/seed_replay.h"
#include "tests/support/ipc_descriptors.h"

namespace {

using namespace weft::transport::cuda;

std::string bytesOf(const IpcDescriptor& d) {
  const IpcDescriptorBytes b = encodeIpcDescriptor(d);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

IpcDescriptor cuMem() {
  return weft::test::cuMemIpcDescriptor({.ownerPid = 1234,
                                         .ownerDevice = 0,
                                         .allocationId = 1,
                                         .ownerBase = 0x7f0000200000,
                                         .allocationBytes = 2 << 20,
                                         .length = 2 << 20},
                                        40, 0xabcdef, 0x5eed);
}

IpcDescriptor legacy() {
  const unsigned char handle[] = {1};
  return weft::test::legacyIpcDescriptor({.ownerPid = 1235,
                                          .allocationId = 9,
                                          .ownerBase = 0x7f0000000000,
                                          .allocationBytes = 1 << 20,
                                          .offset = 512,
                                          .length = 1024},
                                         handle);
}

std::vector<std::string> acceptedSeeds() { return {bytesOf(cuMem()), bytesOf(legacy())}; }

std::vector<std::string> refusedInputs() {
  std::vector<std::string> out;
  auto add = [&](IpcDescriptor d, auto mutate) {
    mutate(d);
    out.push_back(bytesOf(d));
  };
  add(cuMem(), [](IpcDescriptor& d) { d.offset = d.allocationBytes; });
  add(cuMem(), [](IpcDescriptor& d) { d.offset = 4096, d.length = ~0ull - 1000; });
  add(cuMem(), [](IpcDescriptor& d) { d.allocationBytes = ~0ull & ~4095ull; });
  add(cuMem(), [](IpcDescriptor& d) { d.ownerFd = -1; });
  add(cuMem(), [](IpcDescriptor& d) { d.secret = 0; });
  add(cuMem(), [](IpcDescriptor& d) { d.ownerPid = 0; });
  add(cuMem(), [](IpcDescriptor& d) { d.kind = 7; });
  add(cuMem(), [](IpcDescriptor& d) { d.ownerBase = ~0ull - 4095; });
  add(legacy(), [](IpcDescriptor& d) { d.legacyHandle[0] = 0; });
  add(legacy(), [](IpcDescriptor& d) { d.ownerFd = 5; });
  add(legacy(), [](IpcDescriptor& d) { d.length = 0; });
  out.push_back("");
  out.push_back(bytesOf(cuMem()) + "x");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (weft::fuzz::emitSeeds(argc, argv, acceptedSeeds())) return 0;
  weft::fuzz::SeedReplay replay(weft::fuzz::checkCudaIpcInput);
  replay.truncationsRefused = true;
  replay.seeds(acceptedSeeds());
  replay.hostile(refusedInputs());
  return replay.report("CUDA IPC");
}
