// Runs the shm property (shm_descriptor_check.h) over generated seeds - one well-formed input of
// each kind - and deterministic malformed variants of them (every truncation, every bit flip of
// the fields, hostile sizes and addresses), so the malformed-input coverage runs in every build.
// The hostile inputs must be refused and the seeds accepted. `--emit DIR` writes the seeds for
// libFuzzer.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tests/fuzz/seed_replay.h"
#include "tests/fuzz/shm_descriptor_check.h"

namespace {

using namespace weft::transport;

struct Fields {
  std::string bytes;
  template <typename T>
  Fields& add(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
};

// A descriptor input: selector 0, size word, address, slot bytes, switches, landing left, inline.
std::string descriptor(uint32_t rawBytes, uint64_t remote, uint32_t slotBytes, uint8_t switches,
                       uint32_t landingLeft, const MappedRef& ref = {}) {
  Fields f;
  f.add<uint8_t>(0).add(rawBytes).add(remote).add(slotBytes).add(switches).add(landingLeft);
  std::string inlineData(kInlineBytes, '\0');
  std::memcpy(inlineData.data(), &ref, sizeof ref);
  return f.bytes + inlineData;
}

std::string geometry(uint64_t slots, uint64_t slotBytes) {
  return Fields().add<uint8_t>(1).add(slots).add(slotBytes).bytes;
}

std::string name(const std::string& entry) { return std::string(1, '\x02') + entry; }

const MappedRef kRegion{7, 0x10000, 0x8000, 3, 0};

std::vector<std::string> acceptedSeeds() {
  return {
      descriptor(kInlineBytes | kInlineFlag, 0, 4096, 0, 0),
      descriptor(8 | kInlineFlag, 0, 4096, 0, 0),
      descriptor(4096, 0, 4096, 0, 0),
      descriptor(512 | kLandedFlag, 0, 4096, 1, 512),
      descriptor(0x1000 | kMappedFlag, 0x17000, 4096, 2, 0, kRegion),
      descriptor(1 << 20, 0x7f0000001000, 4096, 2, 0),
      geometry(8, 128 << 10),
      geometry(kMaxSlots, kMaxSlotBytes),
      name("weft.0123456789abcdef.bell.3.ns4026531836.pid1234"),
      name("weft.0123456789abcdef.pair.0.1.2.ns4026531836.pid1234.pid1235"),
  };
}

std::vector<std::string> refusedInputs() {
  return {
      descriptor((kInlineBytes + 1) | kInlineFlag, 0, 4096, 0, 0),
      descriptor(kMaxMessageBytes | kInlineFlag, 0, 4096, 0, 0),
      descriptor(4097, 0, 4096, 0, 0),
      descriptor(8 | kInlineFlag, 0x1000, 4096, 2, 0),
      descriptor(8 | kInlineFlag | kMappedFlag, 0x1000, 4096, 2, 0),
      descriptor(513 | kLandedFlag, 0, 4096, 1, 512),
      descriptor(8 | kLandedFlag, 0, 4096, 0, 512),
      descriptor(8 | kMappedFlag, 0, 4096, 2, 0, kRegion),
      descriptor(64, 0x1000, 4096, 0, 0),
      geometry(0, 4096),
      geometry(kMaxSlots + 1, 4096),
      geometry(8, kMaxSlotBytes + 64),
      geometry(64, ~0ull / 64 * 64),
      geometry(8, 100),
      name("weft.0123456789abcdef.bell.3"),
      name("weft.0123456789abcdef.bell.3.ns1.pid0"),
      name("weft.0123456789abcdef.bell.3.ns1.pid99999999999"),
      name("weft.0123456789abcdef.bell.3.pid12.ns1"),
      name("weft.0123456789abcdef.bell.3.ns1.ns2.pid12"),
      name("weft.0123456789ABCDEF.bell.3.ns1.pid12"),
      name("weft..ns1.pid12"),
      name("other.0123456789abcdef.bell.3.ns1.pid12"),
  };
}

// A failure line names the input's selector (-1: empty input).
std::string selector(const std::string& input) {
  return " (selector " + std::to_string(input.empty() ? -1 : static_cast<uint8_t>(input[0]) % 3) +
         ")";
}

}  // namespace

int main(int argc, char** argv) {
  if (weft::fuzz::emitSeeds(argc, argv, acceptedSeeds())) return 0;
  weft::fuzz::SeedReplay replay(weft::fuzz::checkShmInput, selector);
  // The bit flips stay in the fields (past the selector byte, inside the first 40 bytes).
  replay.flipFromByte = 1;
  replay.flipToByte = 40;
  replay.seeds(acceptedSeeds());
  replay.hostile(refusedInputs());
  // A message that overruns its mapped region, or whose end wraps the address space (the sum
  // the check once made wrapped to a small number and passed), is not mapped: it is copied by
  // reference instead (the kernel checks that copy).
  unsigned char inlineData[kInlineBytes] = {};
  const std::pair<MappedRef, uint64_t> unmappable[] = {{kRegion, kRegion.base + 0x7001},
                                                       {kRegion, ~0ull - 0x10}};
  for (const auto& [ref, remote] : unmappable) {
    std::memcpy(inlineData, &ref, sizeof ref);
    DescriptorLimits limits;
    limits.slotBytes = 4096;
    limits.byReference = true;
    Descriptor d;
    std::string why;
    if (!decodeDescriptor(0x2000 | kMappedFlag, remote, inlineData, limits, &d, &why) ||
        d.kind != MessageKind::kRemote) {
      std::fprintf(stderr, "a mapped reference outside its region was not turned into a copy\n");
      ++replay.failures;
    }
    ++replay.runs;
  }
  return replay.report("shm");
}
