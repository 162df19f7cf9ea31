#include "src/cuda/memory_kind.h"

#include <cstdint>
#include <cstdio>

namespace weft::cuda {
namespace {

std::string describe(const void* ptr) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", ptr);
  return text;
}

std::string where(const CallBuffer& b, const PointerInfo& info) {
  std::string s = std::string(b.name) + " (" + describe(b.ptr) + ") is ";
  switch (info.kind) {
    case MemoryKind::kHost:
      return s + "host memory";
    case MemoryKind::kDevice:
      return s + "device memory on GPU " + std::to_string(info.device);
    case MemoryKind::kManaged:
      return s + "managed memory of GPU " + std::to_string(info.device);
  }
  return s;
}

// Why a cudaStream_t cannot be used here, or "" when the driver has a device to run it on.
std::string noDeviceReason(const DriverLoad& driver) {
  if (!driver.api) return driver.why;
  int count = 0;
  const CuResult rc = driver.api->deviceGetCount(&count);
  if (rc == kCuErrorNotInitialized) return "CUDA is not initialized in this process";
  if (rc != kCuSuccess) return "cuDeviceGetCount failed (CUresult " + std::to_string(rc) + ")";
  if (count == 0) return "the driver sees no GPU";
  return "";
}

}  // namespace

PointerInfo classifyPointer(const DriverApi* api, const void* ptr) {
  PointerInfo info;
  if (!api || !ptr) return info;
  const auto address = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ptr));
  unsigned memoryType = 0;
  // Any failure means the driver does not know the pointer: CUDA_ERROR_INVALID_VALUE for plain
  // host memory, CUDA_ERROR_NOT_INITIALIZED when no context (hence no device memory) exists.
  if (api->pointerGetAttribute(&memoryType, kCuPointerAttributeMemoryType, address) != kCuSuccess)
    return info;
  if (memoryType == kCuMemoryTypeHost) return info;  // pinned host memory: the host may use it
  if (memoryType != kCuMemoryTypeDevice && memoryType != kCuMemoryTypeArray &&
      memoryType != kCuMemoryTypeUnified)
    return info;
  int device = -1;
  if (api->pointerGetAttribute(&device, kCuPointerAttributeDeviceOrdinal, address) != kCuSuccess)
    device = -1;
  unsigned managed = 0;
  if (api->pointerGetAttribute(&managed, kCuPointerAttributeIsManaged, address) != kCuSuccess)
    managed = 0;
  info.kind = managed ? MemoryKind::kManaged : MemoryKind::kDevice;
  info.device = device;
  return info;
}

Status chooseRoute(const DriverLoad& driver, std::span<const CallBuffer> buffers,
                   const void* stream, bool hostStream, Route* route, std::string* why) {
  *route = Route{};
  const bool cudaStream = stream && !hostStream;
  if (cudaStream) {
    const std::string reason = noDeviceReason(driver);
    if (!reason.empty()) {
      *why = "no CUDA device: stream " + describe(stream) +
             " is neither NULL nor a Weft host stream, and it cannot be a CUDA stream: " + reason;
      return Status::kInvalidArgument;
    }
  }
  const CallBuffer* firstHost = nullptr;
  const CallBuffer* firstDevice = nullptr;  // device or managed
  PointerInfo hostInfo, deviceInfo;
  bool anyDevice = false;  // device memory proper, which only the CUDA path may touch
  for (const CallBuffer& b : buffers) {
    if (!b.ptr) continue;
    const PointerInfo info = classifyPointer(driver.api.get(), b.ptr);
    if (info.kind == MemoryKind::kHost) {
      if (!firstHost) firstHost = &b, hostInfo = info;
      continue;
    }
    anyDevice = anyDevice || info.kind == MemoryKind::kDevice;
    if (!firstDevice) {
      firstDevice = &b, deviceInfo = info;
    } else if (info.device != deviceInfo.device) {
      *why = where(*firstDevice, deviceInfo) + " but " + where(b, info) +
             ": one call's buffers must be on one GPU";
      return Status::kInvalidArgument;
    }
  }
  if (firstHost && firstDevice) {
    *why = where(*firstDevice, deviceInfo) + " but " + where(*firstHost, hostInfo) +
           ": one call's buffers must all be host memory or all device memory";
    return Status::kInvalidArgument;
  }
  if (anyDevice && hostStream) {
    *why = where(*firstDevice, deviceInfo) +
           ", and a Weft host stream runs host memory only: pass a cudaStream_t (or NULL)";
    return Status::kInvalidArgument;
  }
  if (firstHost && cudaStream) {
    *why = where(*firstHost, hostInfo) +
           " with a CUDA stream: pass device memory, or NULL or a Weft host stream for host "
           "memory";
    return Status::kInvalidArgument;
  }
  if (anyDevice || (firstDevice && cudaStream)) {
    route->path = ExecPath::kDevice;
    route->device = deviceInfo.device;
  } else if (cudaStream) {
    // No buffer at all (count 0): nothing to touch, but the work is still ordered on the stream.
    route->path = ExecPath::kDevice;
  }
  return Status::kSuccess;
}

}  // namespace weft::cuda
