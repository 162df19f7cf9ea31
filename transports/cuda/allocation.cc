#include "transports/cuda/allocation.h"

#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "transports/cuda/fd_passing.h"

namespace weft::transport::cuda {
namespace {

using namespace weft::cuda;

// Process-wide: ncclMemFree and the exporter see every allocation of the process, whatever
// communicator (if any) it is used with.
struct ExportState {
  std::mutex mu;
  std::map<uintptr_t, DeviceAllocation> byBase;
  std::unique_ptr<FdServer> server;
  std::atomic<uint64_t> nextId{1};
};

ExportState& exportState() {
  static ExportState* state = new ExportState;  // never destroyed: used from atexit paths
  return *state;
}

Status driverFailed(const DriverApi& api, const char* step, CuResult rc, std::string* why) {
  *why = std::string(step) + " failed: " + resultText(&api, rc);
  return rc == kCuErrorOutOfMemory ? Status::kSystemError : Status::kUnhandledCudaError;
}

int attribute(const DriverApi& api, CuDevice dev, int which) {
  int v = 0;
  if (!api.deviceGetAttribute || api.deviceGetAttribute(&v, which, dev) != kCuSuccess) return 0;
  return v;
}

CuDevicePtr address(const void* p) {
  return static_cast<CuDevicePtr>(reinterpret_cast<uintptr_t>(p));
}
void* pointer(CuDevicePtr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

// cuMemAlloc memory, where the device or driver has no cuMem.
Status createPlain(const DriverApi& api, int device, size_t bytes, DeviceAllocation* out,
                   std::string* why) {
  if (!api.memAlloc || !api.memFree) {
    *why = "the CUDA driver has neither cuMem* (" + missingEntryPoint(&api, DriverFeature::kVmm) +
           ") nor cuMemAlloc_v2";
    return Status::kUnhandledCudaError;
  }
  CuDevicePtr p = 0;
  if (CuResult rc = api.memAlloc(&p, bytes); rc != kCuSuccess)
    return driverFailed(api, "cuMemAlloc", rc, why);
  *out = DeviceAllocation{};
  out->base = pointer(p);
  out->bytes = out->requested = bytes;
  out->device = device;
  return Status::kSuccess;
}

}  // namespace

bool currentContextDevice(const DriverApi* api, int* device) {
  if (!api || !api->ctxGetCurrent || !api->ctxGetDevice) return false;
  CuContext ctx = nullptr;
  if (api->ctxGetCurrent(&ctx) != kCuSuccess || !ctx) return false;
  CuDevice dev = -1;
  if (api->ctxGetDevice(&dev) != kCuSuccess || dev < 0) return false;
  *device = dev;  // a CUdevice is its ordinal
  return true;
}

Status createDeviceAllocation(const DriverApi& api, int device, size_t bytes, DeviceAllocation* out,
                              std::string* why) {
  if (bytes == 0) {
    *why = "size is 0";
    return Status::kInvalidArgument;
  }
  CuDevice dev = device;
  if (api.deviceGet && api.deviceGet(&dev, device) != kCuSuccess) dev = device;
  const bool vmm = missingEntryPoint(&api, DriverFeature::kVmm).empty() &&
                   attribute(api, dev, kCuDeviceAttributeVmmSupported) != 0;
  if (!vmm) return createPlain(api, device, bytes, out, why);

  CuMemAllocationProp prop;
  prop.type = kCuMemAllocationTypePinned;
  prop.location.type = kCuMemLocationTypeDevice;
  prop.location.id = dev;
  const bool fdHandles = attribute(api, dev, kCuDeviceAttributePosixFdSupported) != 0;
  if (fdHandles) prop.requestedHandleTypes = kCuMemHandleTypePosixFd;
  if (attribute(api, dev, kCuDeviceAttributeGpuDirectRdmaWithVmm))
    prop.allocFlags.gpuDirectRDMACapable = 1;
  size_t granularity = 0;
  if (api.memGetAllocationGranularity(&granularity, &prop, kCuMemAllocGranularityRecommended) !=
          kCuSuccess ||
      granularity == 0) {
    if (CuResult rc =
            api.memGetAllocationGranularity(&granularity, &prop, kCuMemAllocGranularityMinimum);
        rc != kCuSuccess || granularity == 0)
      return driverFailed(api, "cuMemGetAllocationGranularity", rc, why);
  }
  if (bytes > ~size_t{0} - granularity) {
    *why = std::to_string(bytes) + " bytes cannot be rounded to the allocation granularity";
    return Status::kInvalidArgument;
  }
  const size_t rounded = (bytes + granularity - 1) / granularity * granularity;

  DeviceAllocation a;
  a.requested = bytes;
  a.bytes = rounded;
  a.device = device;
  a.cuMem = true;
  if (CuResult rc = api.memCreate(&a.handle, rounded, &prop, 0); rc != kCuSuccess)
    return driverFailed(api, "cuMemCreate", rc, why);
  CuDevicePtr va = 0;
  if (CuResult rc = api.memAddressReserve(&va, rounded, granularity, 0, 0); rc != kCuSuccess) {
    api.memRelease(a.handle);
    return driverFailed(api, "cuMemAddressReserve", rc, why);
  }
  if (CuResult rc = api.memMap(va, rounded, 0, a.handle, 0); rc != kCuSuccess) {
    api.memAddressFree(va, rounded);
    api.memRelease(a.handle);
    return driverFailed(api, "cuMemMap", rc, why);
  }
  a.base = pointer(va);
  // Readable and writable by the owner and by every device that can reach it over P2P, so a
  // peer process on another GPU can load and store it once mapped.
  int count = 0;
  if (api.deviceGetCount(&count) != kCuSuccess || count < 1) count = 1;
  std::vector<CuMemAccessDesc> access;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CuDevice peer = ordinal;
    if (api.deviceGet && api.deviceGet(&peer, ordinal) != kCuSuccess) continue;
    int can = ordinal == device ? 1 : 0;
    if (ordinal != device && api.deviceCanAccessPeer(&can, peer, dev) != kCuSuccess) can = 0;
    if (!can) continue;
    CuMemAccessDesc d;
    d.location.type = kCuMemLocationTypeDevice;
    d.location.id = peer;
    d.flags = kCuMemAccessProtReadWrite;
    access.push_back(d);
  }
  if (CuResult rc = api.memSetAccess(va, rounded, access.data(), access.size()); rc != kCuSuccess) {
    destroyDeviceAllocation(api, a);
    return driverFailed(api, "cuMemSetAccess", rc, why);
  }
  if (fdHandles) {
    int fd = -1;
    if (CuResult rc = api.memExportToShareableHandle(&fd, a.handle, kCuMemHandleTypePosixFd, 0);
        rc != kCuSuccess || fd < 0) {
      destroyDeviceAllocation(api, a);
      return driverFailed(api, "cuMemExportToShareableHandle", rc, why);
    }
    a.fd = fd;
    a.secret = randomNonzero64();
  }
  *out = a;
  return Status::kSuccess;
}

void destroyDeviceAllocation(const DriverApi& api, const DeviceAllocation& a) {
  if (!a.cuMem) {
    if (a.base && api.memFree) api.memFree(address(a.base));
    return;
  }
  if (a.base) {
    api.memUnmap(address(a.base), a.bytes);
    api.memAddressFree(address(a.base), a.bytes);
  }
  if (a.handle) api.memRelease(a.handle);
  if (a.fd >= 0) close(a.fd);
}

void* allocateDeviceMemory(const DriverApi& api, int device, size_t bytes) {
  DeviceAllocation a;
  std::string why;
  if (Status s = createDeviceAllocation(api, device, bytes, &a, &why); s != Status::kSuccess)
    fail(s, "ncclMemAlloc: " + std::to_string(bytes) + " bytes on GPU " + std::to_string(device) +
                ": " + why);
  ExportState& st = exportState();
  a.id = st.nextId.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(st.mu);
  st.byBase[reinterpret_cast<uintptr_t>(a.base)] = a;
  return a.base;
}

bool freeDeviceMemory(const DriverApi& api, void* ptr) {
  ExportState& st = exportState();
  DeviceAllocation a;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.byBase.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == st.byBase.end()) return false;
    a = it->second;
    st.byBase.erase(it);
    // Withdrawn before the fd closes, so the fd socket never sends a reused number.
    if (st.server && a.fd >= 0) st.server->withdraw(a.fd);
  }
  destroyDeviceAllocation(api, a);
  return true;
}

bool findDeviceAllocation(const void* ptr, DeviceAllocation* out) {
  ExportState& st = exportState();
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(st.mu);
  auto it = st.byBase.upper_bound(p);
  if (it == st.byBase.begin()) return false;
  --it;
  if (p - it->first >= it->second.bytes) return false;
  *out = it->second;
  return true;
}

size_t deviceAllocationCount() {
  ExportState& st = exportState();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.byBase.size();
}

FdServer* exportFdServer(std::string* why) {
  ExportState& st = exportState();
  std::lock_guard<std::mutex> lock(st.mu);
  if (!st.server) st.server = FdServer::start(why);
  return st.server.get();
}

}  // namespace weft::transport::cuda
