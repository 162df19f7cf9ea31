// The property for what an ib connection reads from its peer (transports/ib/wire.h): a setup
// message (QpInfo) is refused, or every range this side would write into the peer's FIFO lies
// inside the FIFO the message describes, without wrapping the address space; a data immediate
// is refused or names a slot of the FIFO and a part count of 1..queue pairs; a control byte is
// one of the three known ones or refused; a landing offer (after an immediate that announces
// one) is refused, or names a range that does not wrap, for a message between the credited and
// the sent ones, and every write the sender's walk of it makes lies inside the offered range.
// Input: a switch byte, this side's shape (queue pairs, slots, slot bytes, link layer; taken
// from the message itself when the switch's low bit is set, so that the deeper checks run), the
// QpInfo's bytes, then immediates (4 bytes each) and control bytes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tests/fuzz/field_reader.h"
#include "transports/ib/wire.h"

namespace weft::fuzz {

[[noreturn]] inline void ibPropertyFailed(const std::string& what, std::string_view input) {
  std::fprintf(stderr, "ib wire property violated: %s (input of %zu bytes)\n", what.c_str(),
               input.size());
  std::abort();
}

// A landing offer as the sender reads it: the LandingOffer's bytes, the mailbox entry, slots,
// the sender's credited and sent counts, then (tag, bytes) pairs of the messages it walks.
// Returns whether the offer was accepted.
inline bool checkIbOffer(std::string_view input) {
  using namespace weft::ib;
  FieldReader in(input);
  LandingOffer o;
  in.bytes(&o, sizeof o);
  uint32_t entry = 0, slots = 0;
  uint64_t credited = 0, wired = 0;
  in.bytes(&entry, 4);
  in.bytes(&slots, 4);
  in.bytes(&credited, 8);
  in.bytes(&wired, 8);
  slots = std::max<uint32_t>(1, slots % kMaxSlots);
  const bool accepted = checkLandingOffer(o, entry, slots, credited, wired).empty();
  if (accepted) {
    if (o.addr == 0 || o.bytes == 0 || o.bytes > kMaxLandingBytes || o.addr > UINT64_MAX - o.bytes)
      ibPropertyFailed("accepted a landing offer of an invalid range", input);
    if (o.startSeq < credited || o.startSeq > wired || o.startSeq % mailboxEntries(slots) != entry)
      ibPropertyFailed("accepted a landing offer for a message it cannot place", input);
  }
  uint64_t taken = 0;
  bool walking = accepted;
  while (in.rest().size() >= 8) {
    uint32_t tag = 0, bytes = 0;
    in.bytes(&tag, 4);
    in.bytes(&bytes, 4);
    uint64_t remote = 0;
    // Any range landingTarget gives lies inside the offer, walked or not.
    if (landingTarget(o, tag, bytes, &remote) &&
        (remote < o.addr || remote - o.addr > o.bytes || bytes > o.bytes - (remote - o.addr)))
      ibPropertyFailed("a landing range outside the offer", input);
    if (!walking) continue;
    if (!offerTakes(o, taken, tag, bytes)) {
      walking = false;
      continue;
    }
    if (!landingTarget(o, taken, bytes, &remote) || remote != o.addr + taken)
      ibPropertyFailed("a taken message without its place in the offer", input);
    taken += bytes;
    if (taken > o.bytes) ibPropertyFailed("the walk ran past the offer", input);
    if (taken == o.bytes) walking = false;
  }
  return accepted;
}

// Returns whether the setup message was accepted.
inline bool checkIbInput(std::string_view input) {
  using namespace weft::ib;
  FieldReader in(input);
  uint8_t switches = 0;
  in.bytes(&switches, 1);
  LocalShape self;
  in.bytes(&self.qps, 4);
  in.bytes(&self.slots, 4);
  in.bytes(&self.slotBytes, 8);
  uint8_t ethernet = 0;
  in.bytes(&ethernet, 1);
  self.ethernet = ethernet & 1;
  QpInfo peer;
  in.bytes(&peer, sizeof peer);
  if (switches & 1) {
    self.qps = peer.qps;
    self.slots = peer.slots;
    self.slotBytes = peer.slotBytes;
    self.ethernet = peer.ethernet == 1;
  }
  const bool accepted = checkPeerInfo(peer, self).empty();
  if (accepted) {
    if (peer.qps < 1 || peer.qps > kMaxQps || peer.slots < 1 || peer.slots > kMaxSlots ||
        peer.slotBytes < 1 || peer.slotBytes > kMaxSlotBytes)
      ibPropertyFailed("accepted an unusable shape", input);
    const uint64_t fifo = fifoBytes(peer.slots, peer.slotBytes);
    // The largest message in the first and the last slot, split every way this side would.
    for (uint32_t slot : {0u, peer.slots - 1})
      for (uint32_t parts = 1; parts <= peer.qps; ++parts)
        for (uint32_t part = 0; part < parts; ++part) {
          uint64_t offset = 0, length = 0;
          partRange(slot, peer.slotBytes, kHeaderBytes + peer.slotBytes, part, parts, &offset,
                    &length);
          if (offset > fifo || length > fifo - offset)
            ibPropertyFailed("a part outside the peer's FIFO", input);
          if (peer.recvAddr > UINT64_MAX - offset - length)
            ibPropertyFailed("a remote range that wraps the address space", input);
        }
  }
  const uint32_t slots = std::max<uint32_t>(1, self.slots % kMaxSlots);
  const uint32_t qps = std::clamp<uint32_t>(self.qps, 1, kMaxQps);
  while (in.rest().size() >= 4) {
    uint32_t imm = 0;
    in.bytes(&imm, 4);
    DataImmediate d;
    std::string why;
    if (decodeDataImmediate(imm, slots, qps, &d, &why)) {
      if (d.slot >= slots || d.parts < 1 || d.parts > qps)
        ibPropertyFailed("accepted an immediate outside the FIFO", input);
    } else if (why.empty()) {
      ibPropertyFailed("refused an immediate without saying why", input);
    }
    if ((imm & kCreditBit) && (imm & kOfferBit)) {
      checkIbOffer(in.rest());  // the rest is the offer
      break;
    }
    const char c = static_cast<char>(imm & 0xff);
    const char meaning = controlByte(c);
    if (meaning != 0 && meaning != c) ibPropertyFailed("a control byte changed meaning", input);
    if (meaning == 0 && (c == kReady || c == kPoisoned || c == kGoodbye))
      ibPropertyFailed("a known control byte refused", input);
  }
  return accepted;
}

}  // namespace weft::fuzz
