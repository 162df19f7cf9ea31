#include "transports/cuda/ipc.h"

#include <unistd.h>

#include <cstring>

#include "transports/cuda/allocation.h"

namespace weft::transport::cuda {
namespace {

using namespace weft::cuda;

CuDevicePtr address(const void* p) {
  return static_cast<CuDevicePtr>(reinterpret_cast<uintptr_t>(p));
}

Status driverFailed(const DriverApi& api, const std::string& step, CuResult rc, std::string* why) {
  *why = step + " failed: " + resultText(&api, rc);
  return Status::kUnhandledCudaError;
}

Status outside(const void* ptr, size_t length, uint64_t base, uint64_t bytes, std::string* why) {
  *why = "buffer " + std::to_string(reinterpret_cast<uintptr_t>(ptr)) + " +" +
         std::to_string(length) + " leaves its allocation [" + std::to_string(base) + ", +" +
         std::to_string(bytes) + ")";
  return Status::kInvalidArgument;
}

Status exportLegacy(const DriverApi& api, const void* ptr, size_t length, IpcDescriptor* out,
                    std::string* why) {
  if (std::string missing = missingEntryPoint(&api, DriverFeature::kLegacyIpc); !missing.empty()) {
    *why = "the CUDA driver lacks " + missing + ": cannot share cudaMalloc memory";
    return Status::kUnhandledCudaError;
  }
  CuDevicePtr base = 0;
  size_t bytes = 0;
  if (CuResult rc = api.memGetAddressRange(&base, &bytes, address(ptr)); rc != kCuSuccess) {
    *why = "pointer is not device memory the driver knows (cuMemGetAddressRange: " +
           resultText(&api, rc) + ")";
    return Status::kInvalidArgument;
  }
  const uint64_t offset = address(ptr) - base;
  if (length == 0 || offset >= bytes || length > bytes - offset)
    return outside(ptr, length, base, bytes, why);
  unsigned long long bufferId = 0;
  if (CuResult rc = api.pointerGetAttribute(&bufferId, kCuPointerAttributeBufferId, base);
      rc != kCuSuccess)
    return driverFailed(api, "cuPointerGetAttribute(BUFFER_ID)", rc, why);
  int device = -1;
  if (api.pointerGetAttribute(&device, kCuPointerAttributeDeviceOrdinal, base) != kCuSuccess)
    device = -1;
  CuIpcMemHandle handle{};
  if (CuResult rc = api.ipcGetMemHandle(&handle, base); rc != kCuSuccess)
    return driverFailed(api, "cuIpcGetMemHandle", rc, why);
  IpcDescriptor d;
  d.kind = static_cast<uint16_t>(IpcKind::kLegacy);
  d.ownerPid = getpid();
  d.ownerDevice = device;
  d.allocationId = bufferId;
  d.ownerBase = base;
  d.allocationBytes = bytes;
  d.offset = offset;
  d.length = length;
  std::memcpy(d.legacyHandle, handle.reserved, sizeof d.legacyHandle);
  *out = d;
  return Status::kSuccess;
}

}  // namespace

Status exportDeviceBuffer(const DriverApi& api, const void* ptr, size_t length, IpcDescriptor* out,
                          std::string* why) {
  DeviceAllocation a;
  if (!findDeviceAllocation(ptr, &a) || a.fd < 0) return exportLegacy(api, ptr, length, out, why);
  const uint64_t offset = address(ptr) - address(a.base);
  if (length == 0 || length > a.bytes - offset)
    return outside(ptr, length, address(a.base), a.bytes, why);
  std::string serverWhy;
  FdServer* server = exportFdServer(&serverWhy);
  if (server) server->share(a.fd, a.secret);
  IpcDescriptor d;
  d.kind = static_cast<uint16_t>(IpcKind::kCuMemFd);
  d.ownerPid = getpid();
  d.ownerDevice = a.device;
  d.allocationId = a.id;
  d.ownerBase = address(a.base);
  d.allocationBytes = a.bytes;
  d.offset = offset;
  d.length = length;
  d.ownerFd = a.fd;
  // Without a server peers can still use pidfd_getfd; nonce 0 tells them there is no socket.
  d.socketNonce = server ? server->nonce() : 0;
  d.secret = a.secret;
  *out = d;
  return Status::kSuccess;
}

IpcImporter::IpcImporter(const DriverApi& api, int device, Options options)
    : api_(api), device_(device), options_(options) {}

IpcImporter::~IpcImporter() { close(); }

Status IpcImporter::mapCuMem(const IpcDescriptor& d, Mapping* m, std::string* why) {
  if (std::string missing = missingEntryPoint(&api_, DriverFeature::kVmm); !missing.empty()) {
    *why = "the CUDA driver lacks " + missing + ": cannot map a peer's ncclMemAlloc memory";
    return Status::kUnhandledCudaError;
  }
  bool viaSocket = false;
  const int fd = fetchPeerFd(d.ownerPid, d.ownerFd, d.socketNonce, d.secret, options_.fdTimeout,
                             options_.route, why, &viaSocket);
  if (fd < 0) return Status::kSystemError;
  if (viaSocket) ++fdsFromSocket_;
  CuMemHandle handle = 0;
  const CuResult imported = api_.memImportFromShareableHandle(
      &handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)), kCuMemHandleTypePosixFd);
  ::close(fd);  // the imported handle holds the memory; the fd is no longer needed
  if (imported != kCuSuccess)
    return driverFailed(api_, "cuMemImportFromShareableHandle", imported, why);
  CuDevicePtr va = 0;
  if (CuResult rc = api_.memAddressReserve(&va, d.allocationBytes, 0, 0, 0); rc != kCuSuccess) {
    api_.memRelease(handle);
    return driverFailed(api_, "cuMemAddressReserve", rc, why);
  }
  if (CuResult rc = api_.memMap(va, d.allocationBytes, 0, handle, 0); rc != kCuSuccess) {
    api_.memAddressFree(va, d.allocationBytes);
    api_.memRelease(handle);
    return driverFailed(api_, "cuMemMap (a peer's allocation)", rc, why);
  }
  CuMemAccessDesc access;
  access.location.type = kCuMemLocationTypeDevice;
  access.location.id = device_;
  access.flags = kCuMemAccessProtReadWrite;
  *m = Mapping{IpcKind::kCuMemFd, d.allocationBytes, va, handle};
  if (CuResult rc = api_.memSetAccess(va, d.allocationBytes, &access, 1); rc != kCuSuccess) {
    unmap(*m);
    return driverFailed(api_, "cuMemSetAccess on GPU " + std::to_string(device_), rc, why);
  }
  return Status::kSuccess;
}

Status IpcImporter::mapLegacy(const IpcDescriptor& d, Mapping* m, std::string* why) {
  if (std::string missing = missingEntryPoint(&api_, DriverFeature::kLegacyIpc); !missing.empty()) {
    *why = "the CUDA driver lacks " + missing + ": cannot map a peer's cudaMalloc memory";
    return Status::kUnhandledCudaError;
  }
  CuIpcMemHandle handle;
  std::memcpy(handle.reserved, d.legacyHandle, sizeof handle.reserved);
  CuDevicePtr base = 0;
  if (CuResult rc = api_.ipcOpenMemHandle(&base, handle, kCuIpcMemLazyEnablePeerAccess);
      rc != kCuSuccess)
    return driverFailed(api_, "cuIpcOpenMemHandle", rc, why);
  *m = Mapping{IpcKind::kLegacy, d.allocationBytes, base, 0};
  return Status::kSuccess;
}

void IpcImporter::unmap(const Mapping& m) {
  if (m.kind == IpcKind::kLegacy) {
    api_.ipcCloseMemHandle(m.base);
    return;
  }
  api_.memUnmap(m.base, m.bytes);
  api_.memAddressFree(m.base, m.bytes);
  api_.memRelease(m.handle);
}

Status IpcImporter::map(const IpcDescriptor& d, void** ptr, std::string* why) {
  // Descriptors built in this process are already checked; ones off the wire went through
  // parseIpcDescriptor. Checked again here, cheaply, so no caller can skip it.
  IpcDescriptor checked;
  const IpcDescriptorBytes raw = encodeIpcDescriptor(d);
  if (!parseIpcDescriptor(raw, &checked, why)) return Status::kInvalidArgument;
  std::lock_guard<std::mutex> lock(mu_);
  const auto key = std::make_pair(d.ownerPid, d.allocationId);
  auto it = mappings_.find(key);
  if (it == mappings_.end()) {
    Mapping m{};
    const Status s = static_cast<IpcKind>(d.kind) == IpcKind::kCuMemFd ? mapCuMem(d, &m, why)
                                                                       : mapLegacy(d, &m, why);
    if (s != Status::kSuccess) return s;
    it = mappings_.emplace(key, m).first;
  } else if (it->second.kind != static_cast<IpcKind>(d.kind) ||
             it->second.bytes != d.allocationBytes) {
    *why = "allocation " + std::to_string(d.allocationId) + " of process " +
           std::to_string(d.ownerPid) + " is already mapped with another size or kind";
    return Status::kInvalidArgument;
  }
  *ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(it->second.base + d.offset));
  return Status::kSuccess;
}

void IpcImporter::close() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, m] : mappings_) unmap(m);
  mappings_.clear();
}

size_t IpcImporter::mappedAllocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mappings_.size();
}

size_t IpcImporter::fdsFromSocket() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fdsFromSocket_;
}

}  // namespace weft::transport::cuda
