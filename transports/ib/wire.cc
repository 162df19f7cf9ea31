#include "transports/ib/wire.h"

#include <algorithm>

namespace weft::ib {

std::string checkPeerInfo(const QpInfo& peer, const LocalShape& self) {
  if (peer.magic != kInfoMagic) return "sent a malformed setup message";
  if (peer.qps != self.qps)
    return "uses " + std::to_string(peer.qps) + " queue pairs per connection, this side " +
           std::to_string(self.qps) + " (NCCL_IB_QPS_PER_CONNECTION differs)";
  if (peer.qps == 0 || peer.qps > kMaxQps)
    return "sent a setup message with " + std::to_string(peer.qps) + " queue pairs";
  for (uint32_t i = 0; i < peer.qps; ++i)
    if (peer.qpn[i] == 0 || peer.qpn[i] > 0xffffff)
      return "sent a setup message with an invalid queue pair number";
  if (peer.psn > 0xffffff) return "sent a setup message with an invalid packet sequence number";
  if (peer.slots != self.slots || peer.slotBytes != self.slotBytes)
    return "uses a FIFO of " + std::to_string(peer.slots) + " x " + std::to_string(peer.slotBytes) +
           " B, this side " + std::to_string(self.slots) + " x " + std::to_string(self.slotBytes) +
           " B";
  if (peer.slots == 0 || peer.slots > kMaxSlots || peer.slotBytes == 0 ||
      peer.slotBytes > kMaxSlotBytes)
    return "sent a setup message with an unusable FIFO shape";
  if (peer.ethernet != (self.ethernet ? 1 : 0))
    return "its port's link layer differs from this side's (RoCE against InfiniBand)";
  if (peer.mtu < 1 || peer.mtu > 5) return "sent a setup message with an invalid path MTU";
  // The FIFO must be an address range: the highest byte written stays below 2^64.
  if (peer.recvAddr == 0 ||
      peer.recvAddr > UINT64_MAX - recvRegionBytes(peer.slots, peer.slotBytes))
    return "sent a setup message with an invalid receive FIFO address";
  if (peer.ethernet) {
    if (std::all_of(peer.gid, peer.gid + 16, [](uint8_t b) { return b == 0; }))
      return "sent a setup message without a GID";
  } else if (peer.lid == 0) {
    return "sent a setup message without a LID";
  }
  return {};
}

bool decodeDataImmediate(uint32_t imm, uint32_t slots, uint32_t qps, DataImmediate* out,
                         std::string* why) {
  if (imm & kCreditBit) {
    *why = "sent a credit where data was expected";
    return false;
  }
  out->slot = imm & (kMaxSlots - 1);
  out->parts = (imm >> 24) & 0x3f;
  out->landed = (imm & kLandedBit) != 0;
  if (out->slot >= slots || out->parts == 0 || out->parts > qps) {
    *why = "sent a garbage control message (slot " + std::to_string(out->slot) + ", parts " +
           std::to_string(out->parts) + ")";
    return false;
  }
  return true;
}

std::string checkLandingOffer(const LandingOffer& o, uint32_t entry, uint32_t slots,
                              uint64_t credited, uint64_t wired) {
  if (entry >= mailboxEntries(slots) || o.startSeq % mailboxEntries(slots) != entry)
    return "sent a landing offer in the wrong mailbox entry";
  if (o.addr == 0 || o.bytes == 0 || o.bytes > kMaxLandingBytes || o.addr > UINT64_MAX - o.bytes)
    return "sent a landing offer of an invalid range (" + std::to_string(o.bytes) + " B)";
  if (o.startSeq < credited || o.startSeq > wired)
    return "sent a landing offer for message " + std::to_string(o.startSeq) + " (credited " +
           std::to_string(credited) + ", sent " + std::to_string(wired) + ")";
  return {};
}

bool landingTarget(const LandingOffer& o, uint64_t at, uint64_t bytes, uint64_t* remoteAddr) {
  // The offer's own range is checked again (checkLandingOffer refuses a wrapping one): a range
  // named here never wraps the address space, whatever offer it is asked of.
  if (o.addr > UINT64_MAX - o.bytes || at > o.bytes || bytes > o.bytes - at) return false;
  *remoteAddr = o.addr + at;
  return true;
}

void partRange(uint32_t slot, uint64_t slotBytes, uint64_t total, uint32_t part, uint32_t parts,
               uint64_t* offset, uint64_t* length) {
  const uint64_t from = total * part / parts, to = total * (part + 1) / parts;
  *offset = static_cast<uint64_t>(slot) * (kHeaderBytes + slotBytes) + from;
  *length = to - from;
}

}  // namespace weft::ib
