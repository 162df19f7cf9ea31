// What one process sends another (through the bootstrap) so that the receiver can map a device
// allocation of the sender: a fixed-size POD, encoded as its bytes (both ends run on one host,
// so one byte order and one layout). Everything in it is checked on receipt: a peer's bytes
// never decide a size, offset or fd number that the receiver has not bounded.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace weft::transport::cuda {

inline constexpr uint32_t kIpcMagic = 0x31435057;  // "WPC1" little-endian
inline constexpr uint16_t kIpcVersion = 1;
inline constexpr size_t kIpcLegacyHandleBytes = 64;  // CU_IPC_HANDLE_SIZE
// No allocation on one GPU is larger than this (2^48 bytes: the GPU's virtual address width).
inline constexpr uint64_t kIpcMaxBytes = 1ull << 48;
// cuMem allocations are at least page-aligned and page-sized (the driver's granularity is a
// multiple of the page).
inline constexpr uint64_t kIpcCuMemAlignment = 4096;

enum class IpcKind : uint16_t {
  kCuMemFd = 1,  // cuMemCreate memory exported as a POSIX fd: fetched from the owner's fd table
  kLegacy = 2,   // cudaMalloc memory: a cuIpcGetMemHandle handle
};

struct IpcDescriptor {
  uint32_t magic = kIpcMagic;
  uint16_t version = kIpcVersion;
  uint16_t kind = 0;             // IpcKind
  int32_t ownerPid = 0;          // the exporting process
  int32_t ownerDevice = -1;      // its CUDA ordinal for the allocation (informational)
  uint64_t allocationId = 0;     // unique in the owner process: the importer's cache key with pid
  uint64_t ownerBase = 0;        // the allocation's base address in the owner
  uint64_t allocationBytes = 0;  // the whole allocation (what is mapped)
  uint64_t offset = 0;           // where the described buffer starts in the allocation
  uint64_t length = 0;           // the buffer's length
  int32_t ownerFd = -1;          // kCuMemFd: the fd number in the owner's table; else -1
  uint32_t reserved = 0;         // must be zero
  uint64_t socketNonce = 0;      // kCuMemFd: names the owner's fd socket (SCM_RIGHTS fallback)
  uint64_t secret = 0;  // kCuMemFd: proves to that socket that the asker got this descriptor
  unsigned char legacyHandle[kIpcLegacyHandleBytes] = {};  // kLegacy: the CUipcMemHandle
};
static_assert(sizeof(IpcDescriptor) == 144, "IpcDescriptor is a wire format");

using IpcDescriptorBytes = std::array<std::byte, sizeof(IpcDescriptor)>;

IpcDescriptorBytes encodeIpcDescriptor(const IpcDescriptor& d);

// Decodes and validates `bytes`: exact size, magic, version, a known kind, a positive pid,
// 1 <= allocationBytes <= kIpcMaxBytes, offset + length inside the allocation (length >= 1),
// and per kind: kCuMemFd has an fd >= 0, a page-aligned base and size and a nonzero secret;
// kLegacy has fd -1, no socket and a handle that is not all zeros. On refusal returns false and
// says why; *out is then unspecified.
bool parseIpcDescriptor(std::span<const std::byte> bytes, IpcDescriptor* out, std::string* why);

}  // namespace weft::transport::cuda
