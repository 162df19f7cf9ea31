// The property fuzzed on the bootstrap's wire: whatever bytes arrive where the root port, a rank
// port or a user's unique id is read, the decoders (src/bootstrap/wire.cc, unique_id.cc) never
// crash, never accept something they cannot reproduce, and bound every length before it is used.
// Input layout: byte 0 picks what is read (0: root port, 1: rank port, 2: unique id), the rest
// is the byte stream.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"
#include "src/common/error.h"

namespace weft::fuzz {

inline void bootstrapViolation(const char* what) {
  std::fprintf(stderr, "bootstrap wire property violated: %s\n", what);
  std::abort();
}

// An address that decodes must encode back to the same 24 bytes' meaning.
inline void checkAddress(const uint8_t* in) {
  bootstrap::SocketAddress a;
  if (!bootstrap::wire::decodeAddress(in, &a)) return;
  uint8_t again[bootstrap::wire::kAddressBytes];
  bootstrap::wire::encodeAddress(a, again);
  bootstrap::SocketAddress b;
  if (!bootstrap::wire::decodeAddress(again, &b) || !(a == b))
    bootstrapViolation("address does not round-trip");
  (void)a.toString();
}

// Root port: secret, then the root hello's fields (read by RootServer::advance/handleHello).
inline void checkRootPort(const uint8_t* p, size_t n) {
  namespace wire = bootstrap::wire;
  if (n >= wire::kRootReplyHeaderBytes) {
    wire::RootReplyHeader h = wire::decodeRootReply(p);
    uint8_t again[wire::kRootReplyHeaderBytes];
    wire::encodeRootReply(h, again);
    if (std::memcmp(again, p, sizeof(again)) != 0) bootstrapViolation("root reply round trip");
    (void)wire::rootStatusText(h.status);
  }
  if (n < wire::kRootHelloBytes) return;
  bootstrap::Secret secret;
  std::memcpy(secret.data(), p, secret.size());
  (void)bootstrap::secretsEqual(p, secret.data());
  wire::RootHello h;
  if (!wire::decodeRootHello(p, &h)) return;
  if (h.listen.empty()) bootstrapViolation("root hello accepted without an address");
  uint8_t again[wire::kRootHelloBytes];
  wire::encodeRootHello(secret, h, again);
  wire::RootHello h2;
  if (!wire::decodeRootHello(again, &h2) || h2.version != h.version || h2.rank != h.rank ||
      h2.nranks != h.nranks || !(h2.listen == h.listen))
    bootstrapViolation("root hello round trip");
  checkAddress(p + bootstrap::kSecretBytes + 12);
}

// Rank port: secret, peer hello, then frames (read by TcpBootstrap::advancePending and
// readIncoming): every header is decoded and its length bounded before the body is skipped.
inline void checkRankPort(const uint8_t* p, size_t n) {
  namespace wire = bootstrap::wire;
  if (n < wire::kPeerHelloBytes) return;
  bootstrap::Secret secret;
  std::memcpy(secret.data(), p, secret.size());
  uint32_t version = wire::getU32(p + bootstrap::kSecretBytes);
  int32_t rank = static_cast<int32_t>(wire::getU32(p + bootstrap::kSecretBytes + 4));
  uint8_t hello[wire::kPeerHelloBytes];
  wire::encodePeerHello(secret, rank, hello);
  if (version == wire::kPeerHelloVersion && std::memcmp(hello, p, sizeof(hello)) != 0)
    bootstrapViolation("peer hello round trip");
  size_t at = wire::kPeerHelloBytes;
  while (n - at >= wire::kFrameHeaderBytes) {
    wire::FrameHeader h = wire::decodeFrameHeader(p + at);
    uint8_t again[wire::kFrameHeaderBytes];
    wire::encodeFrameHeader(h, again);
    if (std::memcmp(again, p + at, sizeof(again)) != 0) bootstrapViolation("frame header");
    at += wire::kFrameHeaderBytes;
    if (h.length > wire::kMaxMessageBytes) return;  // the reader drops the connection here
    at += static_cast<size_t>(std::min<uint64_t>(h.length, n - at));
  }
}

// A unique id as a user hands it over: decoded or rejected with kInvalidArgument, nothing else.
inline void checkUniqueId(const uint8_t* p, size_t n) {
  bootstrap::UniqueIdBytes id{};
  std::memcpy(id.bytes, p, std::min(n, sizeof(id.bytes)));
  bootstrap::DecodedId d;
  try {
    d = bootstrap::decodeUniqueId(id);
  } catch (const Error& e) {
    if (e.code() != Status::kInvalidArgument) bootstrapViolation("id rejected with another code");
    return;
  }
  bootstrap::UniqueIdBytes again = bootstrap::encodeUniqueId(d.root, d.secret);
  bootstrap::DecodedId d2 = bootstrap::decodeUniqueId(again);
  if (!(d2.root == d.root) || d2.secret != d.secret) bootstrapViolation("unique id round trip");
}

inline void checkBootstrapBytes(std::string_view input) {
  if (input.empty()) return;
  auto* p = reinterpret_cast<const uint8_t*>(input.data()) + 1;
  size_t n = input.size() - 1;
  switch (static_cast<uint8_t>(input[0]) % 3) {
    case 0:
      checkRootPort(p, n);
      break;
    case 1:
      checkRankPort(p, n);
      break;
    default:
      checkUniqueId(p, n);
      break;
  }
  if (n >= bootstrap::wire::kAddressBytes) checkAddress(p + n - bootstrap::wire::kAddressBytes);
}

}  // namespace weft::fuzz
