// The property for what an shm rank reads from its peer (transports/shm/descriptor.h and
// segment_names.h): a message descriptor either decodes into a message that lies inside the
// memory it names (its inline bytes, its data slot, the landing offer, the mapped region) or is
// refused; a FIFO geometry is refused or lays out without overflow; a /dev/shm entry name is
// refused or names a pid namespace and live-able pids, and a name Weft makes parses back.
// Input: a selector byte, then the fields in little-endian order (short input reads as zeros).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/field_reader.h"
#include "transports/shm/descriptor.h"
#include "transports/shm/segment_names.h"

namespace weft::fuzz {

[[noreturn]] inline void shmPropertyFailed(const std::string& what, std::string_view input) {
  std::fprintf(stderr, "shm descriptor property violated: %s (input of %zu bytes)\n", what.c_str(),
               input.size());
  std::abort();
}

// A descriptor against the receiver's limits. The slot and the inline bytes are separate heap
// blocks of exactly their size, so a sanitizer reports any read past what was accepted.
inline bool checkDescriptor(FieldReader& r, std::string_view input) {
  using namespace weft::transport;
  const uint32_t rawBytes = r.next<uint32_t>();
  const uint64_t remote = r.next<uint64_t>();
  DescriptorLimits limits;
  limits.slotBytes = r.next<uint32_t>() % (1u << 20);  // keeps the slot block small
  const uint8_t switches = r.next<uint8_t>();
  limits.landingOpen = switches & 1;
  limits.byReference = switches & 2;
  limits.landingLeft = r.next<uint32_t>();
  auto* inlineData = new unsigned char[kInlineBytes];
  r.bytes(inlineData, kInlineBytes);
  Descriptor d;
  std::string why;
  std::vector<unsigned char> scratch;  // what the receiver would copy out of an accepted message
  const bool ok = decodeDescriptor(rawBytes, remote,
                                   *reinterpret_cast<unsigned char(*)[kInlineBytes]>(inlineData),
                                   limits, &d, &why);
  if (ok) {
    if (d.bytes != (rawBytes & ~kSizeFlags)) shmPropertyFailed("size changed", input);
    switch (d.kind) {
      case MessageKind::kLanded:
        if (!limits.landingOpen || d.bytes > limits.landingLeft || remote != 0)
          shmPropertyFailed("landed outside the offer", input);
        break;
      case MessageKind::kInline:
        if (remote != 0) shmPropertyFailed("inline message with an address", input);
        std::vector<unsigned char>(inlineData, inlineData + d.bytes).swap(scratch);
        break;
      case MessageKind::kSlot: {
        std::vector<unsigned char> slot(limits.slotBytes);
        if (d.bytes > slot.size()) shmPropertyFailed("slot message beyond its slot", input);
        std::vector<unsigned char>(slot.data(), slot.data() + d.bytes).swap(scratch);
        break;
      }
      case MessageKind::kMapped: {
        const unsigned __int128 end = static_cast<unsigned __int128>(d.regionOffset) + d.bytes;
        if (!limits.byReference || d.ref.fd < 0 || end > d.ref.bytes ||
            d.ref.base + d.regionOffset != remote)
          shmPropertyFailed("mapped message outside its region", input);
        break;
      }
      case MessageKind::kRemote:
        if (!limits.byReference || remote == 0) shmPropertyFailed("unexpected reference", input);
        break;
    }
  } else if (why.empty()) {
    shmPropertyFailed("refused without a reason", input);
  }
  delete[] inlineData;
  return ok;
}

inline bool checkGeometry(FieldReader& r, std::string_view input) {
  using namespace weft::transport;
  const uint64_t slots = r.next<uint64_t>(), slotBytes = r.next<uint64_t>();
  std::string why;
  if (!fifoGeometryValid(slots, slotBytes, &why)) {
    if (why.empty()) shmPropertyFailed("geometry refused without a reason", input);
    return false;
  }
  const unsigned __int128 need = static_cast<unsigned __int128>(slots) * slotBytes;
  if (fifoBytes(static_cast<uint32_t>(slots), slotBytes) < need)
    shmPropertyFailed("FIFO size overflowed", input);
  return true;
}

inline bool checkSegmentName(FieldReader& r, std::string_view input) {
  using namespace weft::transport;
  const std::string entry(r.rest());
  SegmentOwners o = parseSegmentName(entry);
  if (o.valid) {
    if (o.pids.empty()) shmPropertyFailed("valid name without pids", input);
    for (int pid : o.pids)
      if (pid <= 0) shmPropertyFailed("non-positive pid", input);
  } else if (!o.pids.empty()) {
    shmPropertyFailed("refused name with pids", input);
  }
  // A name built from the input's first bytes parses back to its pids.
  FieldReader again(input);
  const uint64_t hash = again.next<uint64_t>();
  std::vector<int> pids = {again.next<int32_t>() & 0x3fffffff, again.next<int32_t>() & 0x3fffffff};
  for (int& p : pids) p = p == 0 ? 1 : p;
  const std::string made = segmentName(hash, "pair.0.1.0", pids);
  SegmentOwners back = parseSegmentName(made.substr(1));
  if (!back.valid || back.pids != pids || back.pidNamespace != pidNamespaceId())
    shmPropertyFailed("a name Weft makes does not parse back: " + made, input);
  return o.valid;
}

// Returns whether the input was accepted (false: refused, as malformed input must be).
inline bool checkShmInput(std::string_view input) {
  if (input.empty()) return false;
  FieldReader r(input.substr(1));
  switch (static_cast<uint8_t>(input[0]) % 3) {
    case 0:
      return checkDescriptor(r, input);
    case 1:
      return checkGeometry(r, input);
    default:
      return checkSegmentName(r, input);
  }
}

}  // namespace weft::fuzz
