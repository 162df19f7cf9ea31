// The fake stream driver's GPUs, contexts and CUDA IPC (see fake_stream_driver.cc). It has
// WEFT_FAKE_GPUS GPUs (default 1) of kDefaultSms multiprocessors each (weftFakeSetSmCount changes
// that), each with a primary context; a thread that set none behaves
// as if the runtime had made GPU 0's current. Every pair of GPUs can access each other unless
// WEFT_FAKE_NO_PEER is set. A legacy IPC handle names the owner's pid and the memfd behind the
// allocation, which a peer process maps through /proc (both run as one user on one host, as CUDA
// IPC requires).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/unit/cuda/fake_device_memory.h"

namespace {

using CuResult = int;
using CuDevicePtr = unsigned long long;
constexpr CuResult kSuccess = 0;
constexpr CuResult kInvalidValue = 1;
constexpr CuResult kInvalidDevice = 101;
constexpr CuResult kInvalidContext = 201;
constexpr CuResult kMapFailed = 205;  // CUDA_ERROR_MAP_FAILED
constexpr CuResult kInvalidHandle = 400;
constexpr CuResult kPeerAccessUnsupported = 217;  // CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
constexpr uint32_t kHandleMagic = 0x50494657;     // "WFIP"
constexpr int kMaxGpus = 8;
constexpr int kAttrMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
// Few, so that the direct kernels' blocks (a host thread each) stay few in tests.
constexpr int kDefaultSms = 4;
int smCount = kDefaultSms;

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

int contexts[kMaxGpus];  // each GPU's primary context: its address is the handle
thread_local int* current = &contexts[0];

int gpus() {
  const char* v = std::getenv("WEFT_FAKE_GPUS");
  const int n = v ? std::atoi(v) : 1;
  return n < 1 ? 1 : (n > kMaxGpus ? kMaxGpus : n);
}

bool validDevice(int d) { return d >= 0 && d < gpus(); }

}  // namespace

namespace weft::fake {
int currentDevice() { return current ? static_cast<int>(current - contexts) : 0; }
}  // namespace weft::fake

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT CuResult cuDeviceGetCount(int* n) {
  *n = gpus();
  return kSuccess;
}
FAKE_EXPORT CuResult cuDeviceGet(int* device, int ordinal) {
  if (!validDevice(ordinal)) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}
FAKE_EXPORT CuResult cuDevicePrimaryCtxRetain(void** context, int device) {
  if (!validDevice(device)) return kInvalidDevice;
  *context = &contexts[device];
  return kSuccess;
}
FAKE_EXPORT CuResult cuDevicePrimaryCtxRelease_v2(int device) {
  return validDevice(device) ? kSuccess : kInvalidDevice;
}
FAKE_EXPORT CuResult cuCtxSetCurrent(void* context) {
  auto* c = static_cast<int*>(context);
  if (c && (c < contexts || c >= contexts + gpus())) return kInvalidContext;
  current = c;
  return kSuccess;
}
FAKE_EXPORT CuResult cuCtxGetCurrent(void** context) {
  *context = current;
  return kSuccess;
}
FAKE_EXPORT CuResult cuCtxGetDevice(int* device) {
  if (!current) return kInvalidContext;
  *device = weft::fake::currentDevice();
  return kSuccess;
}
// The multiprocessor count; every other attribute reads 0 (unsupported), as before the fake had
// this entry point.
FAKE_EXPORT CuResult cuDeviceGetAttribute(int* value, int attribute, int device) {
  if (!validDevice(device)) return kInvalidDevice;
  *value = attribute == kAttrMultiprocessorCount ? __atomic_load_n(&smCount, __ATOMIC_RELAXED) : 0;
  return kSuccess;
}
// Sets every GPU's multiprocessor count (at least 1).
FAKE_EXPORT void weftFakeSetSmCount(int sms) {
  __atomic_store_n(&smCount, sms < 1 ? 1 : sms, __ATOMIC_RELAXED);
}
FAKE_EXPORT CuResult cuDeviceGetPCIBusId(char* busId, int length, int device) {
  if (!validDevice(device)) return kInvalidDevice;
  char id[16];
  std::snprintf(id, sizeof id, "0000:%02x:00.0", 0x65 + device);
  if (length < static_cast<int>(std::strlen(id)) + 1) return kInvalidValue;
  std::strcpy(busId, id);
  return kSuccess;
}
FAKE_EXPORT CuResult cuDeviceGetByPCIBusId(int* device, const char* busId) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(busId, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return kInvalidValue;
  const int d = static_cast<int>(bus) - 0x65;
  if (!validDevice(d)) return kInvalidDevice;
  *device = d;
  return kSuccess;
}
FAKE_EXPORT CuResult cuDeviceCanAccessPeer(int* can, int device, int peer) {
  if (!validDevice(device) || !validDevice(peer)) return kInvalidDevice;
  *can = std::getenv("WEFT_FAKE_NO_PEER") ? 0 : 1;
  return kSuccess;
}
FAKE_EXPORT CuResult cuCtxEnablePeerAccess(void* peer, unsigned) {
  auto* c = static_cast<int*>(peer);
  if (!current || !c || c < contexts || c >= contexts + gpus()) return kInvalidContext;
  return std::getenv("WEFT_FAKE_NO_PEER") ? kPeerAccessUnsupported : kSuccess;
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
