#include "src/bootstrap/unique_id.h"

#include <cstring>

#include "src/bootstrap/wire.h"
#include "src/common/error.h"

namespace weft::bootstrap {
namespace {

constexpr char kMagic[4] = {'W', 'E', 'F', 'T'};
constexpr uint8_t kVersion = 1;
constexpr size_t kAddressOffset = 8;
constexpr size_t kSecretOffset = kAddressOffset + wire::kAddressBytes;
constexpr size_t kCheckOffset = kSecretOffset + kSecretBytes;
constexpr size_t kEnd = kCheckOffset + 8;
static_assert(kEnd <= kUniqueIdBytes, "unique id layout must fit in 128 bytes");

uint64_t checkOf(const uint8_t* bytes) {
  return hashBytes(bytes, kCheckOffset, 0x5745465449440001ull);
}

[[noreturn]] void malformed(const char* why) {
  fail(Status::kInvalidArgument, std::string("bootstrap: malformed unique id (") + why + ")");
}

}  // namespace

UniqueIdBytes encodeUniqueId(const SocketAddress& root, const Secret& secret) {
  UniqueIdBytes id{};
  auto* b = reinterpret_cast<uint8_t*>(id.bytes);
  std::memcpy(b, kMagic, sizeof(kMagic));
  b[4] = kVersion;
  wire::encodeAddress(root, b + kAddressOffset);
  std::memcpy(b + kSecretOffset, secret.data(), kSecretBytes);
  wire::putU64(b + kCheckOffset, checkOf(b));
  return id;
}

DecodedId decodeUniqueId(const UniqueIdBytes& id) {
  auto* b = reinterpret_cast<const uint8_t*>(id.bytes);
  if (std::memcmp(b, kMagic, sizeof(kMagic)) != 0) malformed("bad magic");
  if (b[4] != kVersion) malformed("unsupported version");
  if (b[5] || b[6] || b[7]) malformed("bad header");
  for (size_t i = kEnd; i < kUniqueIdBytes; ++i)
    if (b[i] != 0) malformed("bad padding");
  if (wire::getU64(b + kCheckOffset) != checkOf(b)) malformed("checksum mismatch");
  DecodedId out;
  if (!wire::decodeAddress(b + kAddressOffset, &out.root)) malformed("bad root address");
  std::memcpy(out.secret.data(), b + kSecretOffset, kSecretBytes);
  return out;
}

}  // namespace weft::bootstrap
