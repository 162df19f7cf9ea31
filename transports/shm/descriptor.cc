#include "transports/shm/descriptor.h"

#include <bit>
#include <cstring>

namespace weft::transport {

bool fifoGeometryValid(uint64_t slots, uint64_t slotBytes, std::string* why) {
  if (slots < 1 || slots > kMaxSlots) {
    *why = "FIFO of " + std::to_string(slots) + " slots (1 to " + std::to_string(kMaxSlots) + ")";
    return false;
  }
  if (slotBytes < 64 || slotBytes > kMaxSlotBytes || slotBytes % 64 != 0) {
    *why = "FIFO slot of " + std::to_string(slotBytes) + " bytes (a multiple of 64 up to " +
           std::to_string(kMaxSlotBytes) + ")";
    return false;
  }
  return true;
}

bool decodeDescriptor(uint32_t rawBytes, uint64_t remote,
                      const unsigned char (&inlineData)[kInlineBytes],
                      const DescriptorLimits& limits, Descriptor* out, std::string* why) {
  const uint32_t flags = rawBytes & kSizeFlags;
  const uint32_t bytes = rawBytes & ~kSizeFlags;
  *out = Descriptor{};
  out->bytes = bytes;
  out->remote = remote;
  if (std::popcount(flags) > 1) {
    *why = "message descriptor with several kinds (size word " + std::to_string(rawBytes) + ")";
    return false;
  }
  if (flags == kLandedFlag) {
    if (remote != 0 || !limits.landingOpen || bytes > limits.landingLeft) {
      *why = "a message of " + std::to_string(bytes) + " bytes landed outside the offer";
      return false;
    }
    out->kind = MessageKind::kLanded;
    return true;
  }
  if (flags == kInlineFlag) {
    if (remote != 0 || bytes > kInlineBytes) {
      *why = "inline message of " + std::to_string(bytes) + " bytes (at most " +
             std::to_string(kInlineBytes) + ")";
      return false;
    }
    out->kind = MessageKind::kInline;
    return true;
  }
  if (remote == 0) {
    if (flags != 0 || bytes > limits.slotBytes) {
      *why = "slot message of " + std::to_string(bytes) + " bytes in slots of " +
             std::to_string(limits.slotBytes);
      return false;
    }
    out->kind = MessageKind::kSlot;
    return true;
  }
  if (!limits.byReference) {
    *why = "message by reference on a pair that passes none";
    return false;
  }
  out->kind = MessageKind::kRemote;
  if (flags != kMappedFlag) return true;
  static_assert(sizeof(MappedRef) <= kInlineBytes);
  std::memcpy(&out->ref, inlineData, sizeof out->ref);
  const MappedRef& ref = out->ref;
  // [remote, remote + bytes) within [base, base + ref.bytes), without overflowing.
  if (ref.fd >= 0 && remote >= ref.base && remote - ref.base <= ref.bytes &&
      bytes <= ref.bytes - (remote - ref.base)) {
    out->kind = MessageKind::kMapped;
    out->regionOffset = remote - ref.base;
  }
  return true;
}

}  // namespace weft::transport
