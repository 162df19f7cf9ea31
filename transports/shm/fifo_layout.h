// The memory layout of one direction of the slot FIFO (fifo.h): its control block, message
// descriptors and the limits a message's size word obeys. Both the FIFO and the checks of what a
// peer wrote there (descriptor.h) read it; neither needs the other to know the layout.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transports/shm/peer_maps.h"

namespace weft::transport {

inline constexpr uint32_t kMaxSlots = 64;

// 296: a 256-byte message still travels inline. Messages in data slots can run only `slots`
// ahead of the receiver, which costs where ranks take turns on the cores: they turn over that
// much more often. See perf/README.md, "256-byte inline messages".
inline constexpr uint32_t kInlineBytes = 296;
inline constexpr uint32_t kInlineFlag = 1u << 31;  // in SlotInfo::bytes: payload is inlineData
inline constexpr uint32_t kMappedFlag = 1u << 30;  // remote message; inlineData holds a MappedRef
inline constexpr uint32_t kLandedFlag =
    1u << 29;  // the sender wrote the data at the receiver's landing
inline constexpr uint32_t kSizeFlags = kInlineFlag | kMappedFlag | kLandedFlag;
inline constexpr uint32_t kMaxMessageBytes = kLandedFlag - 1;  // below the flag bits

struct alignas(64) SlotInfo {
  std::atomic<uint64_t> seq;  // message index + 1 once published
  uint32_t bytes;
  uint32_t tag;
  uint64_t remote;  // 0: data is in the slot (or inline); else its address in the sender
  unsigned char inlineData[kInlineBytes];
};
static_assert(sizeof(SlotInfo) == 320, "five cache lines per message descriptor");

inline constexpr uint32_t kPoisonedUnknown = 0xffffffffu;  // FifoControl::poisoned, no cause

inline constexpr uint64_t kProbeMagic = 0x57454654434d4131ull;  // "WEFTCMA1"

// The copy of a large rendezvous message split between its receiver and its sender: the
// receiver offers the pieces here, both claim them one at a time, and the sender writes its
// pieces straight into the receiver's destination (same address space, or a writable mapping
// of the receiver's ncclMemAlloc'd region). Lives in the sender -> receiver direction.
struct HelpBoard {
  alignas(64) std::atomic<uint64_t> claim;   // offer id, its piece count, next piece (fifo.cc)
  std::atomic<uint64_t> offer;               // the open offer's id, 0 when none; stored last
  alignas(64) std::atomic<uint32_t> helped;  // pieces the sender finished for the open offer
  alignas(64) uint32_t streaming;            // Store::kStreaming for the destination
  uint64_t pieceBytes;
  uint64_t bytes;
  uint64_t src;         // the message in the sender's address space
  uint64_t dst;         // the destination in the receiver's
  MappedRef dstRegion;  // the receiver's region holding dst (when the sender must map it)
};

// A receiver's offer of where its next messages go: from message `firstMsg` on, in order, they
// fill [dst, dst + bytes) of its memory, and a sender that can write there may store a message's
// data in place and publish only its descriptor (kLandedFlag): nobody copies it again. The
// receiver rewrites the offer under a sequence lock (`version` odd meanwhile); every field is an
// atomic so a sender reading during a rewrite reads no torn word, only a version to retry.
// Lives in the sender -> receiver direction.
struct LandingOffer {
  alignas(64) std::atomic<uint64_t> version;
  std::atomic<uint64_t> firstMsg;
  std::atomic<uint64_t> dst;  // in the receiver's address space
  std::atomic<uint64_t> bytes;
  std::atomic<uint32_t> tag;          // of the operation the receiver waits in; others never land
  std::atomic<uint64_t> regionInode;  // the receiver's ncclMemAlloc'd region holding dst ...
  std::atomic<uint64_t> regionBase;
  std::atomic<uint64_t> regionBytes;
  std::atomic<int64_t> regionFd;  // ... or -1: same address space
};

struct FifoControl {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> dataHead;
  // Set by either side after a fatal error: the failed rank + 1 (kPoisonedUnknown: not named).
  alignas(64) std::atomic<uint32_t> poisoned;
  // 1 while this direction's receiver reads a message in place in the sender's memory (same
  // address space): a sender that gives up waits for 0 before its caller may free the memory
  // (FifoConnection::awaitPeerOutOfMemory). Set only where `poisoned` was still 0 afterwards.
  std::atomic<uint32_t> readerInside;
  // 1 while this direction's sender writes the receiver's memory in place (a landing or a
  // helped copy, same address space): a receiver that gives up waits for 0 before its caller
  // may free its buffers. The same handshake with `poisoned` as readerInside.
  std::atomic<uint32_t> writerInside;
  std::atomic<uint32_t> readerCanRead;    // CMA probe by the receiver: 0 unknown, 1 yes, 2 no
  std::atomic<uint64_t> senderProbeAddr;  // where `magic` sits in the sender's address space
  uint64_t magic;
  SlotInfo info[kMaxSlots];
  HelpBoard help;
  LandingOffer landing;
};

// How a receiver reaches memory named by a rendezvous message: not at all, directly (same
// address space), with process_vm_readv (any memory of the sender), or by mapping the sender's
// shared regions (ncclMemAlloc'd memory only; others go through slots).
enum class RemoteMode { kNone, kDirect, kCma, kMapped };

// Bytes needed for one direction with `slots` slots of `slotBytes` (control block included).
inline size_t fifoBytes(uint32_t slots, size_t slotBytes) {
  auto alignUp = [](size_t v, size_t a) { return (v + a - 1) / a * a; };
  return alignUp(sizeof(FifoControl), 4096) + alignUp(slots * slotBytes, 4096);
}

}  // namespace weft::transport
