// Runs the CUDA IPC descriptor property (cuda_ipc_check.h) over generated seeds - a cuMem and a
// legacy descriptor - and deterministic malformed variants (every truncation, every bit flip,
// hostile sizes and offsets), so the malformed-input coverage runs in every build. The seeds must
// be accepted and the hostile inputs refused. `--emit DIR` writes the seeds for libFuzzer.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/fuzz/cuda_ipc_check.h"

namespace {

using namespace weft::transport::cuda;

std::string bytesOf(const IpcDescriptor& d) {
  const IpcDescriptorBytes b = encodeIpcDescriptor(d);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

IpcDescriptor cuMem() {
  IpcDescriptor d;
  d.kind = static_cast<uint16_t>(IpcKind::kCuMemFd);
  d.ownerPid = 1234;
  d.ownerDevice = 0;
  d.allocationId = 1;
  d.ownerBase = 0x7f0000200000;
  d.allocationBytes = 2 << 20;
  d.offset = 0;
  d.length = 2 << 20;
  d.ownerFd = 40;
  d.socketNonce = 0xabcdef;
  d.secret = 0x5eed;
  return d;
}

IpcDescriptor legacy() {
  IpcDescriptor d;
  d.kind = static_cast<uint16_t>(IpcKind::kLegacy);
  d.ownerPid = 1235;
  d.allocationId = 9;
  d.ownerBase = 0x7f0000000000;
  d.allocationBytes = 1 << 20;
  d.offset = 512;
  d.length = 1024;
  d.legacyHandle[0] = 1;
  return d;
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

int failures = 0;

void expect(bool accepted, bool want, const std::string& input, const char* what) {
  if (accepted == want) return;
  std::fprintf(stderr, "%s input of %zu bytes was %s\n", what, input.size(),
               accepted ? "accepted" : "refused");
  ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--emit") {
    int i = 0;
    for (const std::string& s : acceptedSeeds())
      std::ofstream(std::string(argv[2]) + "/seed" + std::to_string(i++), std::ios::binary) << s;
    return 0;
  }
  size_t runs = 0;
  for (const std::string& s : acceptedSeeds()) {
    expect(weft::fuzz::checkCudaIpcInput(s), true, s, "seed");
    ++runs;
    for (size_t len = 0; len < s.size(); ++len, ++runs)
      expect(weft::fuzz::checkCudaIpcInput(s.substr(0, len)), false, s, "truncated");
    for (size_t bit = 0; bit < s.size() * 8; ++bit, ++runs) {
      std::string v = s;
      v[bit / 8] = static_cast<char>(v[bit / 8] ^ (1 << (bit % 8)));
      weft::fuzz::checkCudaIpcInput(v);
    }
  }
  for (const std::string& s : refusedInputs()) {
    expect(weft::fuzz::checkCudaIpcInput(s), false, s, "hostile");
    ++runs;
  }
  std::printf("%zu CUDA IPC inputs checked, %d unexpected\n", runs, failures);
  return failures == 0 ? 0 : 1;
}
