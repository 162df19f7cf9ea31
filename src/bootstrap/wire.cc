#include "src/bootstrap/wire.h"

#include <arpa/inet.h>

#include <cstring>

#include "src/common/error.h"

namespace weft::bootstrap::wire {

const char* rootStatusText(uint32_t status) {
  switch (static_cast<RootStatus>(status)) {
    case RootStatus::kOk:
      return "ok";
    case RootStatus::kDuplicateRank:
      return "another process already joined with this rank";
    case RootStatus::kNranksMismatch:
      return "nranks differs from the other ranks'";
    case RootStatus::kRankOutOfRange:
      return "rank is out of range";
    case RootStatus::kBadHello:
      return "malformed hello";
    case RootStatus::kTimedOut:
      return "the root timed out before all ranks arrived";
  }
  return "unknown status";
}

void putU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void putU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void putU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
uint16_t getU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t getU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | p[i];
  return v;
}
uint64_t getU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

void encodeAddress(const SocketAddress& addr, uint8_t* out) {
  std::memset(out, 0, kAddressBytes);
  if (addr.family() == AF_INET) {
    auto* sin = reinterpret_cast<const sockaddr_in*>(addr.get());
    out[0] = 4;
    putU16(out + 2, addr.port());
    std::memcpy(out + 4, &sin->sin_addr, 4);
  } else if (addr.family() == AF_INET6) {
    auto* sin6 = reinterpret_cast<const sockaddr_in6*>(addr.get());
    out[0] = 6;
    putU16(out + 2, addr.port());
    std::memcpy(out + 4, &sin6->sin6_addr, 16);
    putU32(out + 20, sin6->sin6_scope_id);
  } else {
    fail(Status::kInternalError, "bootstrap: cannot encode address " + addr.toString());
  }
}

bool decodeAddress(const uint8_t* in, SocketAddress* out) {
  uint16_t port = getU16(in + 2);
  if (in[1] != 0 || port == 0) return false;
  if (in[0] == 4) {
    for (size_t i = 8; i < kAddressBytes; ++i)
      if (in[i] != 0) return false;
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    std::memcpy(&sin.sin_addr, in + 4, 4);
    *out = SocketAddress(reinterpret_cast<sockaddr*>(&sin), sizeof(sin));
    return true;
  }
  if (in[0] == 6) {
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(port);
    std::memcpy(&sin6.sin6_addr, in + 4, 16);
    sin6.sin6_scope_id = getU32(in + 20);
    *out = SocketAddress(reinterpret_cast<sockaddr*>(&sin6), sizeof(sin6));
    return true;
  }
  return false;
}

void encodeRootHello(const Secret& secret, const RootHello& hello, uint8_t* out) {
  std::memcpy(out, secret.data(), kSecretBytes);
  uint8_t* p = out + kSecretBytes;
  putU32(p, hello.version);
  putU32(p + 4, static_cast<uint32_t>(hello.rank));
  putU32(p + 8, static_cast<uint32_t>(hello.nranks));
  encodeAddress(hello.listen, p + 12);
}

bool decodeRootHello(const uint8_t* in, RootHello* out) {
  const uint8_t* p = in + kSecretBytes;
  out->version = getU32(p);
  out->rank = static_cast<int32_t>(getU32(p + 4));
  out->nranks = static_cast<int32_t>(getU32(p + 8));
  return decodeAddress(p + 12, &out->listen);
}

void encodeRootReply(const RootReplyHeader& h, uint8_t* out) {
  putU32(out, h.status);
  putU32(out + 4, static_cast<uint32_t>(h.nranks));
  putU32(out + 8, static_cast<uint32_t>(h.arrived));
}

RootReplyHeader decodeRootReply(const uint8_t* in) {
  RootReplyHeader h;
  h.status = getU32(in);
  h.nranks = static_cast<int32_t>(getU32(in + 4));
  h.arrived = static_cast<int32_t>(getU32(in + 8));
  return h;
}

void encodePeerHello(const Secret& secret, int32_t rank, uint8_t* out) {
  std::memcpy(out, secret.data(), kSecretBytes);
  putU32(out + kSecretBytes, kPeerHelloVersion);
  putU32(out + kSecretBytes + 4, static_cast<uint32_t>(rank));
}

void encodeFrameHeader(const FrameHeader& h, uint8_t* out) {
  putU32(out, h.channel);
  putU32(out + 4, static_cast<uint32_t>(h.tag));
  putU64(out + 8, h.length);
}

FrameHeader decodeFrameHeader(const uint8_t* in) {
  FrameHeader h;
  h.channel = getU32(in);
  h.tag = static_cast<int32_t>(getU32(in + 4));
  h.length = getU64(in + 8);
  return h;
}

}  // namespace weft::bootstrap::wire
