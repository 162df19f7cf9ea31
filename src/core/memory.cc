#include "src/core/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <string>

#include "src/common/error.h"
#include "src/common/log.h"

namespace weft::core {
namespace {
std::mutex gMu;
std::map<const char*, SharedRegion>& regions() {
  static std::map<const char*, SharedRegion> m;
  return m;
}
}  // namespace

void* memAlloc(size_t bytes) {
  if (bytes == 0) fail(Status::kInvalidArgument, "ncclMemAlloc: size is 0");
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t rounded = (bytes + page - 1) / page * page;
  int fd = memfd_create("weft-mem", MFD_CLOEXEC);
  if (fd < 0) fail(Status::kSystemError, sysError("memfd_create", errno));
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
    int e = errno;
    close(fd);
    fail(Status::kSystemError, sysError("ftruncate(" + std::to_string(rounded) + ")", e));
  }
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    fail(Status::kSystemError, sysError("mmap(" + std::to_string(rounded) + ")", e));
  }
  std::lock_guard<std::mutex> lock(gMu);
  regions()[static_cast<const char*>(p)] = SharedRegion{fd, rounded, p};
  WEFT_TRACE(ALLOC, "ncclMemAlloc %zu bytes at %p (memfd %d)", bytes, p, fd);
  return p;
}

void memFree(void* ptr) {
  SharedRegion r;
  {
    std::lock_guard<std::mutex> lock(gMu);
    auto it = regions().find(static_cast<const char*>(ptr));
    if (it == regions().end())
      fail(Status::kInvalidArgument, "ncclMemFree: pointer was not returned by ncclMemAlloc");
    r = it->second;
    regions().erase(it);
  }
  munmap(r.base, r.bytes);
  close(r.fd);
}

bool findSharedRegion(const void* ptr, size_t bytes, SharedRegion* out) {
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(gMu);
  auto it = regions().upper_bound(p);
  if (it == regions().begin()) return false;
  --it;
  const SharedRegion& r = it->second;
  if (p + bytes > static_cast<const char*>(r.base) + r.bytes) return false;
  *out = r;
  return true;
}

}  // namespace weft::core
