// libFuzzer target for the tcp wire format: any bytes, read as a hello and as a run of frame
// headers against a slot size taken from the input, must decode without faults, and every
// accepted frame must lie inside its slot.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transports/tcp/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft::tcp;
  if (size < 4) return 0;
  uint32_t slotBytes;
  std::memcpy(&slotBytes, data, 4);
  data += 4;
  size -= 4;
  if (size >= kHelloBytes) {
    Hello h;
    std::string why;
    if (decodeHello(data, &h, &why) && (h.socketIndex >= h.sockets || h.sockets > kMaxSockets))
      std::abort();
  }
  for (size_t off = 0; off + kFrameHeaderBytes <= size; off += kFrameHeaderBytes) {
    FrameHeader f;
    std::string why;
    if (!decodeFrame(data + off, slotBytes, &f, &why)) continue;
    if (f.total > slotBytes || uint64_t(f.offset) + f.length > f.total || f.part >= f.parts ||
        f.parts > kMaxSockets)
      std::abort();
    // Round trip: what decodes re-encodes to the same bytes.
    uint8_t again[kFrameHeaderBytes];
    encodeFrame(f, again);
    if (std::memcmp(again, data + off, kFrameHeaderBytes) != 0) std::abort();
  }
  return 0;
}
