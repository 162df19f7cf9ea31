#include "transports/cuda/ipc_descriptor.h"

#include <cstring>

namespace weft::transport::cuda {
namespace {

bool refuse(std::string* why, std::string text) {
  *why = "CUDA IPC descriptor refused: " + std::move(text);
  return false;
}

bool allZero(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

}  // namespace

IpcDescriptorBytes encodeIpcDescriptor(const IpcDescriptor& d) {
  IpcDescriptorBytes out;
  std::memcpy(out.data(), &d, sizeof d);
  return out;
}

bool parseIpcDescriptor(std::span<const std::byte> bytes, IpcDescriptor* out, std::string* why) {
  if (bytes.size() != sizeof(IpcDescriptor))
    return refuse(why, std::to_string(bytes.size()) + " bytes, expected " +
                           std::to_string(sizeof(IpcDescriptor)));
  IpcDescriptor d;
  std::memcpy(&d, bytes.data(), sizeof d);
  if (d.magic != kIpcMagic) return refuse(why, "bad magic");
  if (d.version != kIpcVersion)
    return refuse(why, "version " + std::to_string(d.version) + ", this library speaks " +
                           std::to_string(kIpcVersion));
  if (d.reserved != 0) return refuse(why, "reserved field is not zero");
  if (d.ownerPid <= 0) return refuse(why, "owner pid " + std::to_string(d.ownerPid));
  if (d.ownerDevice < -1) return refuse(why, "owner device " + std::to_string(d.ownerDevice));
  if (d.allocationBytes == 0 || d.allocationBytes > kIpcMaxBytes)
    return refuse(why, "allocation of " + std::to_string(d.allocationBytes) + " bytes");
  if (d.length == 0) return refuse(why, "empty buffer");
  // Both below kIpcMaxBytes after these checks, so the sum cannot wrap.
  if (d.offset >= d.allocationBytes || d.length > d.allocationBytes - d.offset)
    return refuse(why, "buffer [" + std::to_string(d.offset) + ", +" + std::to_string(d.length) +
                           ") outside its allocation of " + std::to_string(d.allocationBytes));
  if (d.ownerBase == 0 || d.ownerBase > ~0ull - d.allocationBytes)
    return refuse(why, "owner address range wraps or is null");
  switch (static_cast<IpcKind>(d.kind)) {
    case IpcKind::kCuMemFd:
      if (d.ownerFd < 0) return refuse(why, "cuMem descriptor without an fd");
      if (d.ownerBase % kIpcCuMemAlignment || d.allocationBytes % kIpcCuMemAlignment)
        return refuse(why, "cuMem allocation not page-aligned");
      if (d.secret == 0) return refuse(why, "cuMem descriptor without a secret");
      if (!allZero(d.legacyHandle, sizeof d.legacyHandle))
        return refuse(why, "cuMem descriptor carries a legacy handle");
      break;
    case IpcKind::kLegacy:
      if (d.ownerFd != -1 || d.socketNonce != 0 || d.secret != 0)
        return refuse(why, "legacy descriptor carries fd fields");
      if (allZero(d.legacyHandle, sizeof d.legacyHandle))
        return refuse(why, "legacy descriptor with an empty handle");
      break;
    default:
      return refuse(why, "unknown kind " + std::to_string(d.kind));
  }
  *out = d;
  return true;
}

}  // namespace weft::transport::cuda
