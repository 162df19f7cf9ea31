// What the tcp transport puts on a socket: one Hello when a socket opens (the connecting side
// proves it belongs to the communicator), then frames. A frame is a fixed 32-byte header and
// `length` payload bytes: one stripe of one FIFO slot. Every field is little-endian and checked
// before a byte of payload is read, so a truncated, oversized or garbage frame is an error on
// its connection, never an overflow.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::tcp {

inline constexpr uint32_t kHelloMagic = 0x31485457;  // "WTH1"
inline constexpr uint32_t kFrameMagic = 0x31465457;  // "WTF1"
inline constexpr uint32_t kWireVersion = 1;
inline constexpr uint32_t kMaxSockets = 64;  // per connection; also the most stripes of one slot
inline constexpr uint32_t kTokenBytes = 16;

inline constexpr size_t kHelloBytes = 64;
inline constexpr size_t kFrameHeaderBytes = 32;

// Sent once by the connecting (lower) rank on each socket it opens.
struct Hello {
  uint64_t commHash = 0;
  int32_t srcRank = 0;  // the connecting rank
  int32_t dstRank = 0;  // the accepting rank
  uint32_t channel = 0;
  uint32_t socketIndex = 0;
  uint32_t sockets = 0;  // sockets of this connection
  uint32_t slots = 0;
  uint64_t slotBytes = 0;
  uint8_t token[kTokenBytes] = {};  // the accepting rank's token (learnt from the init allgather)
};

void encodeHello(const Hello& h, uint8_t out[kHelloBytes]);
// Structural checks only (magic, version, ranges that need no context); false and *why on error.
bool decodeHello(const uint8_t in[kHelloBytes], Hello* h, std::string* why);

enum class FrameKind : uint8_t { kData = 1 };

struct FrameHeader {
  FrameKind kind = FrameKind::kData;
  uint8_t part = 0;     // stripe index within the slot
  uint8_t parts = 1;    // stripes of the slot (1..kMaxSockets)
  uint32_t tag = 0;     // the executor's tag of the slot
  uint32_t total = 0;   // bytes of the whole slot
  uint32_t offset = 0;  // where this stripe starts in the slot
  uint32_t length = 0;  // payload bytes that follow the header
  uint64_t seq = 0;     // slot sequence number on the connection (one direction)
};

void encodeFrame(const FrameHeader& f, uint8_t out[kFrameHeaderBytes]);
// Checks magic, kind, stripe indices and that [offset, offset + length) lies inside
// total <= slotBytes. false and *why on error.
bool decodeFrame(const uint8_t in[kFrameHeaderBytes], uint64_t slotBytes, FrameHeader* f,
                 std::string* why);

// Stripes of a slot of `bytes` over `sockets` sockets, none smaller than `minPart` (but at
// least one, even for zero bytes); stripe i covers [partOffset(i), partOffset(i + 1)).
uint32_t partCount(uint64_t bytes, uint32_t sockets, uint64_t minPart);
uint64_t partOffset(uint64_t bytes, uint32_t parts, uint32_t i);

}  // namespace weft::tcp
