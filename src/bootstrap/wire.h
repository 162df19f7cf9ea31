// Byte layouts of everything the bootstrap puts on a socket. All integers are big-endian; every
// message has a fixed size or a length that the reader bounds before allocating.
//
//   address (24 B)     u8 family (4|6), u8 0, u16 port, 16 B address (IPv4: first 4, rest 0),
//                      u32 IPv6 scope id (0 for IPv4)
//   root hello (68 B)  rank -> root: secret[32], u32 kRootHelloVersion, i32 rank, i32 nranks,
//                      address (the rank's listen socket)
//   root reply         root -> rank: u32 status, i32 nranks, i32 arrived; on kOk followed by
//                      nranks addresses (rank order)
//   peer hello (40 B)  first bytes of every rank-to-rank connection: secret[32],
//                      u32 kPeerHelloVersion, i32 sender rank
//   frame header (16B) u32 channel, i32 tag, u64 payload length (<= kMaxMessageBytes)
#pragma once
#include <cstddef>
#include <cstdint>

#include "src/bootstrap/secret.h"
#include "src/bootstrap/socket.h"

namespace weft::bootstrap::wire {

inline constexpr size_t kAddressBytes = 24;
inline constexpr uint32_t kRootHelloVersion = 0x57480001;  // "WH", version 1
inline constexpr size_t kRootHelloBytes = kSecretBytes + 12 + kAddressBytes;
inline constexpr size_t kRootReplyHeaderBytes = 12;
inline constexpr uint32_t kPeerHelloVersion = 0x57500001;  // "WP", version 1
inline constexpr size_t kPeerHelloBytes = kSecretBytes + 8;
inline constexpr size_t kFrameHeaderBytes = 16;

// Largest tagged message and communicator accepted off the wire.
inline constexpr uint64_t kMaxMessageBytes = 1ull << 30;
inline constexpr int kMaxRanks = 1 << 20;

enum class RootStatus : uint32_t {
  kOk = 0,
  kDuplicateRank = 1,
  kNranksMismatch = 2,
  kRankOutOfRange = 3,
  kBadHello = 4,
  kTimedOut = 5,
};
const char* rootStatusText(uint32_t status);

void putU16(uint8_t* p, uint16_t v);
void putU32(uint8_t* p, uint32_t v);
void putU64(uint8_t* p, uint64_t v);
uint16_t getU16(const uint8_t* p);
uint32_t getU32(const uint8_t* p);
uint64_t getU64(const uint8_t* p);

// Throws Error(kInternalError) for an address that is neither IPv4 nor IPv6.
void encodeAddress(const SocketAddress& addr, uint8_t* out);
// False when the bytes do not describe a valid IPv4/IPv6 address with a non-zero port.
bool decodeAddress(const uint8_t* in, SocketAddress* out);

struct RootHello {
  uint32_t version = kRootHelloVersion;
  int32_t rank = -1;
  int32_t nranks = 0;
  SocketAddress listen;
};
void encodeRootHello(const Secret& secret, const RootHello& hello, uint8_t* out);
// Decodes the fields after the secret (which the reader checks first); false when malformed.
bool decodeRootHello(const uint8_t* in, RootHello* out);

struct RootReplyHeader {
  uint32_t status = 0;
  int32_t nranks = 0;
  int32_t arrived = 0;
};
void encodeRootReply(const RootReplyHeader& h, uint8_t* out);
RootReplyHeader decodeRootReply(const uint8_t* in);

void encodePeerHello(const Secret& secret, int32_t rank, uint8_t* out);

struct FrameHeader {
  uint32_t channel = 0;
  int32_t tag = 0;
  uint64_t length = 0;
};
void encodeFrameHeader(const FrameHeader& h, uint8_t* out);
FrameHeader decodeFrameHeader(const uint8_t* in);

}  // namespace weft::bootstrap::wire
