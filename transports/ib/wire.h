// What two ib connection ends tell each other, and the checks a side makes before it trusts
// any of it: the setup message (QpInfo) that travels over the control socket, the immediates of
// data writes and credits, and the control bytes that follow the setup. Pure functions without
// verbs, so that tests and the fuzzer (tests/fuzz) run them anywhere.
//
// A peer is trusted with nothing it could turn into a write outside the registered FIFOs and
// the ranges it offered: this side writes only into slot ranges it computes itself from the FIFO
// shape both sides agreed on (checked here), and into a landing offer only within the offered
// range, after checking the offer (checkLandingOffer, landingTarget); the peer's HCA refuses a
// write outside its registered region or with a wrong key (the sender then sees a completion
// error and fails the connection).
//
// Landings (zero copy): a receiver that knows where the next messages of an operation go
// (PeerMemory::offerLanding) registers that buffer and writes a LandingOffer into the sender's
// offer mailbox (an RDMA WRITE WITH IMMEDIATE on queue pair 0, the path credits take, so the
// sender sees it before any credit returned after it). From the offer's first message on, both
// sides walk the messages with the same rule (offerTakes): a message of the offer's tag that
// fits the rest of the offer takes the next bytes of it, anything else ends the offer. A taken
// message of at least one byte is written straight into the offered buffer (from the sender's
// registered source) with its header written into its slot, and its immediate says so.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "transports/remote/control_bytes.h"

namespace weft::ib {

inline constexpr uint32_t kInfoMagic = 0x31424957;  // "WIB1"
inline constexpr uint32_t kMaxQps = 16;
inline constexpr uint32_t kMaxSlots = 1u << 24;  // a slot index fits the immediate's low 24 bits
inline constexpr uint32_t kCreditBit = 0x80000000u;
// With kCreditBit: the immediate names a mailbox entry holding a LandingOffer, not a credit.
inline constexpr uint32_t kOfferBit = 0x40000000u;
inline constexpr uint32_t kCreditMask = 0x3fffffffu;  // a credit's cumulative count, modulo 2^30
// Without kCreditBit: the message's parts were written into the receiver's landing.
inline constexpr uint32_t kLandedBit = 0x40000000u;
inline constexpr uint64_t kMaxLandingBytes = 1ull << 40;
inline constexpr size_t kHeaderBytes = 16;  // tag, bytes, sequence at the start of each slot
inline constexpr uint64_t kMaxSlotBytes = 1ull << 31;

// Control bytes on the socket after the QpInfo: ib's own kReady (this side's queue pairs are
// connected) and those of every control connection (transports/remote/control_bytes.h).
inline constexpr char kReady = 'R';
using remote::kGoodbye;
using remote::kPoisoned;

// What each side sends the other over the control socket once its queue pairs exist.
struct QpInfo {
  uint32_t magic = 0;
  uint32_t qps = 0;
  uint32_t qpn[kMaxQps] = {};
  uint32_t psn = 0;
  uint32_t slots = 0;
  uint64_t slotBytes = 0;
  uint64_t recvAddr = 0;  // the receive FIFO
  uint32_t recvKey = 0;
  uint16_t lid = 0;
  uint8_t ethernet = 0;
  uint8_t mtu = 0;  // ibv_mtu: 1 (256 B) .. 5 (4096 B)
  uint8_t gid[16] = {};
};
static_assert(sizeof(QpInfo) == 120, "QpInfo is sent as raw bytes: keep its layout");

// This side's view of the connection, against which the peer's QpInfo is checked.
struct LocalShape {
  uint32_t qps = 1;
  uint32_t slots = 0;
  uint64_t slotBytes = 0;
  bool ethernet = false;
};

// A receiver's offer of its destination (see above), as it lies in the mailbox.
struct LandingOffer {
  uint64_t startSeq = 0;  // the first message it applies to
  uint64_t addr = 0;      // the receiver's buffer
  uint64_t bytes = 0;
  uint32_t tag = 0;
  uint32_t rkey = 0;
};
static_assert(sizeof(LandingOffer) == 32, "written as raw bytes: keep its layout");

// Mailbox entries of a FIFO of `slots` slots (offer for message S goes to entry S % entries).
inline uint32_t mailboxEntries(uint32_t slots) { return 2 * slots; }

// Bytes of a FIFO of `slots` slots of `slotBytes` (each behind its header).
inline uint64_t fifoBytes(uint32_t slots, uint64_t slotBytes) {
  return (kHeaderBytes + slotBytes) * slots;
}
// The receive region: the FIFO, then the offer mailbox.
inline uint64_t recvRegionBytes(uint32_t slots, uint64_t slotBytes) {
  return fifoBytes(slots, slotBytes) + uint64_t{mailboxEntries(slots)} * sizeof(LandingOffer);
}

// Empty when `peer` is a setup message this side can act on; otherwise why not, in words that
// follow the peer's name ("uses 3 queue pairs ...").
std::string checkPeerInfo(const QpInfo& peer, const LocalShape& self);

// The immediate of a data write: the slot it filled and how many parts (one per queue pair
// used) make up the message. Credits set kCreditBit and carry a cumulative count instead.
inline uint32_t dataImmediate(uint32_t slot, uint32_t parts, bool landed = false) {
  return (landed ? kLandedBit : 0) | parts << 24 | slot;
}

struct DataImmediate {
  uint32_t slot = 0;
  uint32_t parts = 0;
  bool landed = false;
};
// Decodes a data write's immediate; false (and *why) when it names no slot of a FIFO of
// `slots` slots or a part count outside 1..qps.
bool decodeDataImmediate(uint32_t imm, uint32_t slots, uint32_t qps, DataImmediate* out,
                         std::string* why);

// The remote range of part `part` of `parts` of a message of `total` bytes (header included) in
// slot `slot`: [*offset, *offset + *length) from the start of the peer's FIFO. Always inside
// slot `slot` when slot < slots and total <= kHeaderBytes + slotBytes.
void partRange(uint32_t slot, uint64_t slotBytes, uint64_t total, uint32_t part, uint32_t parts,
               uint64_t* offset, uint64_t* length);

// Empty when `o`, read from mailbox entry `entry`, is an offer the sender can act on: it
// names a buffer (no wrap, at most kMaxLandingBytes), it was written to its message's entry, and
// its first message is one the sender has not wired yet or still remembers (between the
// messages credited and those wired: the mailbox travels with the credits, so an honest
// receiver's offer never names a message before a credit already seen).
std::string checkLandingOffer(const LandingOffer& o, uint32_t entry, uint32_t slots,
                              uint64_t credited, uint64_t wired);

// The rule both sides walk an offer by: whether a message of `tag` and `bytes` takes the next
// bytes of `o`, `at` bytes of which are taken.
inline bool offerTakes(const LandingOffer& o, uint64_t at, uint32_t tag, uint64_t bytes) {
  return tag == o.tag && at <= o.bytes && bytes <= o.bytes - at;
}

// Where `bytes` at `at` of offer `o` lie in the receiver's memory; false when that range is not
// inside the offer (nothing is posted then).
bool landingTarget(const LandingOffer& o, uint64_t at, uint64_t bytes, uint64_t* remoteAddr);

// What a control byte means: 0 for a byte that is none of kReady, kPoisoned, kGoodbye.
inline char controlByte(char c) { return c == kReady || c == kPoisoned || c == kGoodbye ? c : 0; }

}  // namespace weft::ib
