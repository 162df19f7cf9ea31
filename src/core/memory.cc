#include "src/core/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <string>

#include "src/common/error.h"
#include "src/common/log.h"
#include "src/common/shared_region.h"
#include "src/cuda/memory_kind.h"
#include "transports/cuda/allocation.h"
#include "transports/cuda/ipc.h"

namespace weft::core {

namespace {

void* hostAlloc(size_t bytes) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t rounded = (bytes + page - 1) / page * page;
  int fd = memfd_create("weft-mem", MFD_CLOEXEC);
  if (fd < 0) fail(Status::kSystemError, sysError("memfd_create", errno));
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
    int e = errno;
    close(fd);
    fail(Status::kSystemError, sysError("ftruncate(" + std::to_string(rounded) + ")", e));
  }
  // Backed and mapped at once, as device memory is at cudaMalloc: touched for the first time
  // inside a collective, each 4 KiB would cost a fault and a page clear there, many times the
  // call's own work (see perf/README.md, "First touches"), and memory the machine cannot give
  // fails here, not as a SIGBUS mid-call.
  if (int e = posix_fallocate(fd, 0, static_cast<off_t>(rounded)); e != 0) {
    close(fd);
    fail(Status::kSystemError,
         sysError("ncclMemAlloc: backing " + std::to_string(rounded) + " bytes", e));
  }
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    fail(Status::kSystemError, sysError("mmap(" + std::to_string(rounded) + ")", e));
  }
  // And each page touched once through the mapping, here rather than inside a collective.
  touchPages(p, rounded, /*writable=*/true);
  struct stat st {};
  fstat(fd, &st);
  addSharedRegion(SharedRegion{fd, rounded, p, static_cast<uint64_t>(st.st_ino)});
  WEFT_TRACE(ALLOC, "ncclMemAlloc %zu bytes at %p (memfd %d)", bytes, p, fd);
  return p;
}

}  // namespace

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
  return hostAlloc(bytes);
}

void memFree(const cuda::DriverApi* api, void* ptr) {
  if (api && transport::cuda::freeDeviceMemory(*api, ptr)) return;
  SharedRegion r;
  if (!removeSharedRegion(ptr, &r))
    fail(Status::kInvalidArgument, "ncclMemFree: pointer was not returned by ncclMemAlloc");
  munmap(r.base, r.bytes);
  close(r.fd);
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

}  // namespace weft::core
