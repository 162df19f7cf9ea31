#include "src/cuda/memory.h"

#include <map>
#include <mutex>
#include <string>

#include "src/common/error.h"
#include "src/common/log.h"
#include "src/core/host_memory.h"
#include "src/cuda/memory_kind.h"
#include "transports/cuda/allocation.h"
#include "transports/cuda/ipc.h"

namespace weft::cuda {

void* memAlloc(size_t bytes) { return memAlloc(cuda::driver().api.get(), bytes); }

void memFree(void* ptr) { memFree(cuda::driver().api.get(), ptr); }

void* memAlloc(const cuda::DriverApi* api, size_t bytes) {
  if (bytes == 0) fail(Status::kInvalidArgument, "ncclMemAlloc: size is 0");
  int device = -1;
  if (transport::cuda::currentContextDevice(api, &device)) {
    void* p = transport::cuda::allocateDeviceMemory(*api, device, bytes);
    WEFT_TRACE(ALLOC, "ncclMemAlloc %zu bytes at %p on GPU %d", bytes, p, device);
    return p;
  }
  return core::hostMemAlloc(bytes);
}

void memFree(const cuda::DriverApi* api, void* ptr) {
  if (api && transport::cuda::freeDeviceMemory(*api, ptr)) return;
  if (!core::hostMemFree(ptr))
    fail(Status::kInvalidArgument, "ncclMemFree: pointer was not returned by ncclMemAlloc");
}

namespace {

// Registrations by communicator, then by buffer. Process-wide because ncclCommRegister's
// device records live beside the communicator's own host registrations.
struct Registrations {
  std::mutex mu;
  std::map<const void*, std::map<uintptr_t, DeviceRegistration>> byOwner;
};

Registrations& registrations() {
  static Registrations* r = new Registrations;  // never destroyed: used from atexit paths
  return *r;
}

}  // namespace

bool registerDeviceBuffer(const void* owner, const cuda::DriverApi* api, const void* buff,
                          size_t size) {
  if (!api || !buff || size == 0) return false;
  if (cuda::classifyPointer(api, buff).kind != cuda::MemoryKind::kDevice) return false;
  DeviceRegistration reg;
  reg.buff = buff;
  reg.size = size;
  std::string why;
  if (Status s = transport::cuda::exportDeviceBuffer(*api, buff, size, &reg.descriptor, &why);
      s != Status::kSuccess)
    fail(s, "ncclCommRegister: device buffer cannot be shared with peers: " + why);
  Registrations& r = registrations();
  std::lock_guard<std::mutex> lock(r.mu);
  r.byOwner[owner][reinterpret_cast<uintptr_t>(buff)] = reg;
  return true;
}

bool deregisterDeviceBuffer(const void* owner, const void* buff) {
  Registrations& r = registrations();
  std::lock_guard<std::mutex> lock(r.mu);
  auto o = r.byOwner.find(owner);
  if (o == r.byOwner.end() || o->second.erase(reinterpret_cast<uintptr_t>(buff)) == 0) return false;
  if (o->second.empty()) r.byOwner.erase(o);
  return true;
}

bool findDeviceRegistration(const void* owner, const void* ptr, size_t bytes,
                            DeviceRegistration* out) {
  Registrations& r = registrations();
  std::lock_guard<std::mutex> lock(r.mu);
  auto o = r.byOwner.find(owner);
  if (o == r.byOwner.end()) return false;
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = o->second.upper_bound(p);
  // Registrations may nest or overlap: look back for one that covers the whole range.
  while (it != o->second.begin()) {
    --it;
    const uintptr_t offset = p - it->first;
    if (offset < it->second.size && bytes <= it->second.size - offset) {
      *out = it->second;
      return true;
    }
  }
  return false;
}

size_t deviceRegistrationCount(const void* owner) {
  Registrations& r = registrations();
  std::lock_guard<std::mutex> lock(r.mu);
  auto o = r.byOwner.find(owner);
  return o == r.byOwner.end() ? 0 : o->second.size();
}

void dropDeviceRegistrations(const void* owner) {
  Registrations& r = registrations();
  std::lock_guard<std::mutex> lock(r.mu);
  r.byOwner.erase(owner);
}

}  // namespace weft::cuda
