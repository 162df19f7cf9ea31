// Well-formed CUDA IPC descriptors (transports/cuda/ipc_descriptor.h) for tests and the fuzz
// replay: the buffer's place in its owner's allocation, plus the fields each kind needs.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>

#include "transports/cuda/ipc_descriptor.h"

namespace weft::test {

// Where the described buffer lies: the owner, its allocation, and the range inside it.
struct IpcBufferPlace {
  int32_t ownerPid = 0;
  int32_t ownerDevice = -1;
  uint64_t allocationId = 0;
  uint64_t ownerBase = 0;
  uint64_t allocationBytes = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

inline transport::cuda::IpcDescriptor placedIpcDescriptor(transport::cuda::IpcKind kind,
                                                          const IpcBufferPlace& at) {
  transport::cuda::IpcDescriptor d;
  d.kind = static_cast<uint16_t>(kind);
  d.ownerPid = at.ownerPid;
  d.ownerDevice = at.ownerDevice;
  d.allocationId = at.allocationId;
  d.ownerBase = at.ownerBase;
  d.allocationBytes = at.allocationBytes;
  d.offset = at.offset;
  d.length = at.length;
  return d;
}

// A kCuMemFd descriptor: the owner's fd number, its fd socket's nonce and the secret.
inline transport::cuda::IpcDescriptor cuMemIpcDescriptor(const IpcBufferPlace& at, int32_t ownerFd,
                                                         uint64_t socketNonce, uint64_t secret) {
  transport::cuda::IpcDescriptor d = placedIpcDescriptor(transport::cuda::IpcKind::kCuMemFd, at);
  d.ownerFd = ownerFd;
  d.socketNonce = socketNonce;
  d.secret = secret;
  return d;
}

// A kLegacy descriptor whose handle starts with `handle` (the rest zero).
inline transport::cuda::IpcDescriptor legacyIpcDescriptor(const IpcBufferPlace& at,
                                                          std::span<const unsigned char> handle) {
  transport::cuda::IpcDescriptor d = placedIpcDescriptor(transport::cuda::IpcKind::kLegacy, at);
  std::copy_n(handle.begin(), std::min(handle.size(), sizeof d.legacyHandle), d.legacyHandle);
  return d;
}

}  // namespace weft::test
