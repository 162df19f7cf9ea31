// The CUDA IPC descriptor's wire form: well-formed descriptors of both kinds round-trip, and
// every malformed one is refused with a reason.
#include "transports/cuda/ipc_descriptor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "tests/support/ipc_descriptors.h"

namespace weft::transport::cuda {
namespace {

IpcDescriptor cuMemDescriptor() {
  return weft::test::cuMemIpcDescriptor({.ownerPid = 4242,
                                         .ownerDevice = 1,
                                         .allocationId = 7,
                                         .ownerBase = 0x7f0000200000,
                                         .allocationBytes = 4 << 20,
                                         .offset = 4096,
                                         .length = 1 << 20},
                                        17, 0x1234, 0xfeedface);
}

IpcDescriptor legacyDescriptor() {
  unsigned char handle[kIpcLegacyHandleBytes];
  for (size_t i = 0; i < kIpcLegacyHandleBytes; ++i) handle[i] = static_cast<unsigned char>(i + 1);
  // cudaMalloc sizes need not be page multiples.
  return weft::test::legacyIpcDescriptor({.ownerPid = 99,
                                          .ownerDevice = 0,
                                          .allocationId = 3,
                                          .ownerBase = 0x7f0000000000,
                                          .allocationBytes = 1000,
                                          .length = 1000},
                                         handle);
}

bool parses(const IpcDescriptor& d, IpcDescriptor* out = nullptr, std::string* why = nullptr) {
  IpcDescriptor sink;
  std::string reason;
  const IpcDescriptorBytes bytes = encodeIpcDescriptor(d);
  const bool ok = parseIpcDescriptor(bytes, out ? out : &sink, why ? why : &reason);
  if (!ok && (why ? why : &reason)->empty()) ADD_FAILURE() << "refused without a reason";
  return ok;
}

TEST(IpcDescriptor, BothKindsRoundTrip) {
  for (const IpcDescriptor& d : {cuMemDescriptor(), legacyDescriptor()}) {
    IpcDescriptor back;
    std::string why;
    ASSERT_TRUE(parses(d, &back, &why)) << why;
    EXPECT_EQ(0, std::memcmp(&d, &back, sizeof d));
  }
}

TEST(IpcDescriptor, BufferAtTheVeryEndOfItsAllocationIsAccepted) {
  IpcDescriptor d = cuMemDescriptor();
  d.offset = d.allocationBytes - 1;
  d.length = 1;
  EXPECT_TRUE(parses(d));
}

TEST(IpcDescriptor, WrongSizesAreRefused) {
  const IpcDescriptorBytes bytes = encodeIpcDescriptor(cuMemDescriptor());
  IpcDescriptor out;
  std::string why;
  EXPECT_FALSE(parseIpcDescriptor(std::span(bytes).first(bytes.size() - 1), &out, &why));
  EXPECT_NE(why.find("bytes, expected"), std::string::npos) << why;
  EXPECT_FALSE(parseIpcDescriptor({}, &out, &why));
}

struct Mutation {
  const char* name;
  std::function<void(IpcDescriptor&)> apply;
  const char* reason;  // a piece of the expected message
};

TEST(IpcDescriptor, MalformedFieldsAreRefusedWithTheirReason) {
  const Mutation cuMemMutations[] = {
      {"magic", [](IpcDescriptor& d) { d.magic ^= 1; }, "magic"},
      {"version", [](IpcDescriptor& d) { d.version = 2; }, "version 2"},
      {"reserved", [](IpcDescriptor& d) { d.reserved = 1; }, "reserved"},
      {"kind", [](IpcDescriptor& d) { d.kind = 3; }, "unknown kind"},
      {"kind 0", [](IpcDescriptor& d) { d.kind = 0; }, "unknown kind"},
      {"pid 0", [](IpcDescriptor& d) { d.ownerPid = 0; }, "pid"},
      {"pid < 0", [](IpcDescriptor& d) { d.ownerPid = -5; }, "pid"},
      {"device", [](IpcDescriptor& d) { d.ownerDevice = -2; }, "device"},
      {"empty allocation", [](IpcDescriptor& d) { d.allocationBytes = 0; }, "allocation of"},
      {"huge allocation", [](IpcDescriptor& d) { d.allocationBytes = kIpcMaxBytes + 4096; },
       "allocation of"},
      {"empty buffer", [](IpcDescriptor& d) { d.length = 0; }, "empty"},
      {"offset past end", [](IpcDescriptor& d) { d.offset = d.allocationBytes; }, "outside"},
      {"length past end", [](IpcDescriptor& d) { d.length = d.allocationBytes; }, "outside"},
      {"wrapping sum",
       [](IpcDescriptor& d) {
         d.offset = 4096;
         d.length = ~0ull - 100;
       },
       "outside"},
      {"null base", [](IpcDescriptor& d) { d.ownerBase = 0; }, "null"},
      {"wrapping base", [](IpcDescriptor& d) { d.ownerBase = ~0ull - 4095; }, "wraps"},
      {"no fd", [](IpcDescriptor& d) { d.ownerFd = -1; }, "without an fd"},
      {"unaligned base", [](IpcDescriptor& d) { d.ownerBase += 8; }, "page-aligned"},
      {"unaligned size", [](IpcDescriptor& d) { d.allocationBytes += 8; }, "page-aligned"},
      {"no secret", [](IpcDescriptor& d) { d.secret = 0; }, "secret"},
      {"stray handle", [](IpcDescriptor& d) { d.legacyHandle[5] = 1; }, "legacy handle"},
  };
  for (const Mutation& m : cuMemMutations) {
    IpcDescriptor d = cuMemDescriptor();
    m.apply(d);
    std::string why;
    EXPECT_FALSE(parses(d, nullptr, &why)) << m.name;
    EXPECT_NE(why.find(m.reason), std::string::npos) << m.name << ": " << why;
  }
  const Mutation legacyMutations[] = {
      {"fd", [](IpcDescriptor& d) { d.ownerFd = 3; }, "fd fields"},
      {"nonce", [](IpcDescriptor& d) { d.socketNonce = 3; }, "fd fields"},
      {"secret", [](IpcDescriptor& d) { d.secret = 3; }, "fd fields"},
      {"empty handle", [](IpcDescriptor& d) { std::memset(d.legacyHandle, 0, 64); },
       "empty handle"},
  };
  for (const Mutation& m : legacyMutations) {
    IpcDescriptor d = legacyDescriptor();
    m.apply(d);
    std::string why;
    EXPECT_FALSE(parses(d, nullptr, &why)) << m.name;
    EXPECT_NE(why.find(m.reason), std::string::npos) << m.name << ": " << why;
  }
}

// Every single-bit flip of a valid descriptor is either refused or still describes a buffer
// inside its allocation (the property the fuzzer checks on arbitrary input).
TEST(IpcDescriptor, BitFlipsNeverYieldABufferOutsideItsAllocation) {
  for (const IpcDescriptor& base : {cuMemDescriptor(), legacyDescriptor()}) {
    const IpcDescriptorBytes good = encodeIpcDescriptor(base);
    for (size_t bit = 0; bit < good.size() * 8; ++bit) {
      IpcDescriptorBytes b = good;
      b[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
      IpcDescriptor d;
      std::string why;
      if (!parseIpcDescriptor(b, &d, &why)) continue;
      EXPECT_LE(d.offset + d.length, d.allocationBytes) << "bit " << bit;
      EXPECT_GT(d.length, 0u);
    }
  }
}

}  // namespace
}  // namespace weft::transport::cuda
