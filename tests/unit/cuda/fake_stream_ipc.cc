// The fake stream driver's current context and CUDA IPC (see fake_stream_driver.cc): the test
// process behaves as if the runtime had made device 0's primary context current, and a legacy IPC
// handle names the owner's pid and the memfd behind the allocation, which a peer process maps
// through /proc (both run as one user on one host, as CUDA IPC requires).
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "tests/unit/cuda/fake_device_memory.h"

namespace {

using CuResult = int;
using CuDevicePtr = unsigned long long;
constexpr CuResult kSuccess = 0;
constexpr CuResult kInvalidValue = 1;
constexpr CuResult kInvalidDevice = 101;
constexpr CuResult kInvalidHandle = 400;
constexpr CuResult kMapFailed = 205;           // CUDA_ERROR_MAP_FAILED
constexpr uint32_t kHandleMagic = 0x50494657;  // "WFIP"

struct IpcHandle {  // CUipcMemHandle: 64 bytes, passed by value
  unsigned char reserved[64];
};
struct HandleBody {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  uint32_t pad;
  uint64_t bytes;
};
static_assert(sizeof(HandleBody) <= sizeof(IpcHandle), "handle layout");

int contextHandle;  // what cuCtxGetCurrent reports: device 0's primary context

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT CuResult cuCtxGetCurrent(void** context) {
  *context = &contextHandle;
  return kSuccess;
}
FAKE_EXPORT CuResult cuCtxGetDevice(int* device) {
  *device = 0;
  return kSuccess;
}
FAKE_EXPORT CuResult cuDeviceGetPCIBusId(char* busId, int length, int device) {
  if (device != 0) return kInvalidDevice;
  const char* id = "0000:65:00.0";
  if (length < static_cast<int>(std::strlen(id)) + 1) return kInvalidValue;
  std::strcpy(busId, id);
  return kSuccess;
}
FAKE_EXPORT CuResult cuMemGetAddressRange_v2(CuDevicePtr* base, size_t* bytes, CuDevicePtr ptr) {
  weft::fake::Allocation a;
  if (!weft::fake::findDevice(static_cast<uintptr_t>(ptr), &a)) return kInvalidValue;
  if (base) *base = a.base;
  if (bytes) *bytes = a.bytes;
  return kSuccess;
}
FAKE_EXPORT CuResult cuIpcGetMemHandle(IpcHandle* handle, CuDevicePtr ptr) {
  weft::fake::Allocation a;
  if (!weft::fake::findDevice(static_cast<uintptr_t>(ptr), &a) || a.base != ptr || a.imported)
    return kInvalidValue;
  HandleBody body{kHandleMagic, static_cast<int32_t>(getpid()), a.fd, 0, a.bytes};
  std::memset(handle, 0, sizeof(*handle));
  std::memcpy(handle->reserved, &body, sizeof(body));
  return kSuccess;
}
FAKE_EXPORT CuResult cuIpcOpenMemHandle_v2(CuDevicePtr* ptr, IpcHandle handle, unsigned) {
  HandleBody body;
  std::memcpy(&body, handle.reserved, sizeof(body));
  if (body.magic != kHandleMagic || body.pid <= 0 || body.fd < 0) return kInvalidHandle;
  if (body.pid == getpid()) return kInvalidHandle;  // as CUDA: not within one process
  void* p = weft::fake::importDevice(body.pid, body.fd, body.bytes);
  if (!p) return kMapFailed;
  *ptr = reinterpret_cast<uintptr_t>(p);
  return kSuccess;
}
FAKE_EXPORT CuResult cuIpcCloseMemHandle(CuDevicePtr ptr) {
  return weft::fake::closeImported(reinterpret_cast<void*>(ptr)) ? kSuccess : kInvalidValue;
}
