// Encoding of the 128-byte unique id:
//
//   0   4 B  magic "WEFT"
//   4   u8   version (1)
//   5   3 B  zero
//   8   24 B root address (wire::encodeAddress)
//   32  32 B secret
//   64  u64  check = hashBytes(bytes 0..63), big-endian
//   72  56 B zero
//
// The check and the zero padding make random or truncated bytes fail to decode.
#pragma once
#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/secret.h"
#include "src/bootstrap/socket.h"

namespace weft::bootstrap {

struct DecodedId {
  SocketAddress root;
  Secret secret{};
};

UniqueIdBytes encodeUniqueId(const SocketAddress& root, const Secret& secret);
// Throws Error(kInvalidArgument) when the bytes are not a valid id.
DecodedId decodeUniqueId(const UniqueIdBytes& id);

}  // namespace weft::bootstrap
