#include "transports/tcp/wire.h"

#include <algorithm>
#include <cstring>

namespace weft::tcp {
namespace {

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

// Hello layout: magic, version, commHash, srcRank, dstRank, channel, socketIndex, sockets,
// slots, slotBytes, token, 4 bytes zero.
void encodeHello(const Hello& h, uint8_t out[kHelloBytes]) {
  std::memset(out, 0, kHelloBytes);
  put32(out + 0, kHelloMagic);
  put32(out + 4, kWireVersion);
  put64(out + 8, h.commHash);
  put32(out + 16, static_cast<uint32_t>(h.srcRank));
  put32(out + 20, static_cast<uint32_t>(h.dstRank));
  put32(out + 24, h.channel);
  put32(out + 28, h.socketIndex);
  put32(out + 32, h.sockets);
  put32(out + 36, h.slots);
  put64(out + 40, h.slotBytes);
  std::memcpy(out + 48, h.token, kTokenBytes);
}

bool decodeHello(const uint8_t in[kHelloBytes], Hello* h, std::string* why) {
  if (get32(in) != kHelloMagic) {
    *why = "not a weft tcp hello (bad magic)";
    return false;
  }
  if (get32(in + 4) != kWireVersion) {
    *why = "tcp wire version " + std::to_string(get32(in + 4)) + ", expected " +
           std::to_string(kWireVersion);
    return false;
  }
  h->commHash = get64(in + 8);
  h->srcRank = static_cast<int32_t>(get32(in + 16));
  h->dstRank = static_cast<int32_t>(get32(in + 20));
  h->channel = get32(in + 24);
  h->socketIndex = get32(in + 28);
  h->sockets = get32(in + 32);
  h->slots = get32(in + 36);
  h->slotBytes = get64(in + 40);
  std::memcpy(h->token, in + 48, kTokenBytes);
  if (h->srcRank < 0 || h->dstRank < 0 || h->srcRank == h->dstRank) {
    *why = "hello with bad ranks";
    return false;
  }
  if (h->sockets == 0 || h->sockets > kMaxSockets || h->socketIndex >= h->sockets) {
    *why = "hello with bad socket index " + std::to_string(h->socketIndex) + " of " +
           std::to_string(h->sockets);
    return false;
  }
  if (h->channel > 0xffff) {
    *why = "hello with bad channel";
    return false;
  }
  return true;
}

// Frame layout: magic, kind, part, parts, 0, tag, total, offset, length, seq.
void encodeFrame(const FrameHeader& f, uint8_t out[kFrameHeaderBytes]) {
  put32(out + 0, kFrameMagic);
  out[4] = static_cast<uint8_t>(f.kind);
  out[5] = f.part;
  out[6] = f.parts;
  out[7] = 0;
  put32(out + 8, f.tag);
  put32(out + 12, f.total);
  put32(out + 16, f.offset);
  put32(out + 20, f.length);
  put64(out + 24, f.seq);
}

bool decodeFrame(const uint8_t in[kFrameHeaderBytes], uint64_t slotBytes, FrameHeader* f,
                 std::string* why) {
  if (get32(in) != kFrameMagic) {
    *why = "garbage on the wire (bad frame magic)";
    return false;
  }
  if (in[4] != static_cast<uint8_t>(FrameKind::kData) || in[7] != 0) {
    *why = "unknown frame kind " + std::to_string(in[4]);
    return false;
  }
  f->kind = FrameKind::kData;
  f->part = in[5];
  f->parts = in[6];
  f->tag = get32(in + 8);
  f->total = get32(in + 12);
  f->offset = get32(in + 16);
  f->length = get32(in + 20);
  f->seq = get64(in + 24);
  if (f->parts == 0 || f->parts > kMaxSockets || f->part >= f->parts) {
    *why = "frame with bad stripe " + std::to_string(f->part) + " of " + std::to_string(f->parts);
    return false;
  }
  if (f->total > slotBytes) {
    *why = "oversized frame: " + std::to_string(f->total) + " bytes for a slot of " +
           std::to_string(slotBytes);
    return false;
  }
  if (static_cast<uint64_t>(f->offset) + f->length > f->total) {
    *why = "frame stripe [" + std::to_string(f->offset) + ", +" + std::to_string(f->length) +
           ") outside its slot of " + std::to_string(f->total) + " bytes";
    return false;
  }
  return true;
}

uint32_t partCount(uint64_t bytes, uint32_t sockets, uint64_t minPart) {
  sockets = std::clamp<uint32_t>(sockets, 1, kMaxSockets);
  minPart = std::max<uint64_t>(minPart, 1);
  uint64_t parts = (bytes + minPart - 1) / minPart;
  return static_cast<uint32_t>(std::clamp<uint64_t>(parts, 1, sockets));
}

uint64_t partOffset(uint64_t bytes, uint32_t parts, uint32_t i) {
  // Stripes start on 64-byte boundaries where possible so copies stay aligned.
  if (i >= parts) return bytes;
  uint64_t per = (bytes / parts) & ~uint64_t(63);
  if (per == 0) return i == 0 ? 0 : bytes;  // tiny slots: everything in stripe 0
  return per * i;
}

}  // namespace weft::tcp
