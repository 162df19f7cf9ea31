// What a receiver reads from its peer through shared memory, checked before it is used: the
// FIFO geometry of a pair block (rank 0's, from the init allgather) and each message descriptor
// (SlotInfo). A peer that is broken, or not Weft at all, must not make this process read or
// write outside the memory a message may name: a descriptor that could is refused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "transports/shm/fifo_layout.h"

namespace weft::transport {

// Largest data slot: a message in a slot carries its size below the flag bits.
inline constexpr uint64_t kMaxSlotBytes = uint64_t{kMaxMessageBytes} + 1;

// Whether `slots` data slots of `slotBytes` make a FIFO this process can lay out (slots within
// [1, kMaxSlots], slotBytes within [64, kMaxSlotBytes] and a multiple of 64); *why otherwise.
bool fifoGeometryValid(uint64_t slots, uint64_t slotBytes, std::string* why);

enum class MessageKind {
  kLanded,  // written by the sender at the receiver's landing offer
  kInline,  // in the descriptor's inlineData
  kSlot,    // in the next data slot
  kMapped,  // in the sender's shared region `ref`, at regionOffset
  kRemote,  // at `remote` in the sender's address space (same process, or one copy by CMA)
};

// What the receiver knows when it reads a descriptor.
struct DescriptorLimits {
  uint64_t slotBytes = 0;
  bool landingOpen = false;  // the receiver has a landing offer out ...
  uint64_t landingLeft = 0;  // ... which takes this many more bytes
  bool byReference = false;  // the pair passes messages by reference (RemoteMode not kNone)
};

struct Descriptor {
  MessageKind kind = MessageKind::kSlot;
  uint32_t bytes = 0;  // payload bytes, flags removed
  uint64_t remote = 0;
  MappedRef ref;              // kMapped
  uint64_t regionOffset = 0;  // kMapped: where the message starts in `ref`'s region
};

// Decodes the fields of a published SlotInfo. false (and *why) when the descriptor is malformed:
// more than one kind flag, a size beyond its container, a reference the pair does not use.
// A mapped reference whose range lies outside its region decodes as kRemote (a copy the
// kernel checks).
bool decodeDescriptor(uint32_t rawBytes, uint64_t remote,
                      const unsigned char (&inlineData)[kInlineBytes],
                      const DescriptorLimits& limits, Descriptor* out, std::string* why);

}  // namespace weft::transport
