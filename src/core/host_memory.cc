#include "src/core/host_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "src/common/error.h"
#include "src/common/log.h"
#include "src/common/shared_region.h"

namespace weft::core {

void* hostMemAlloc(size_t bytes) {
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

bool hostMemFree(void* ptr) {
  SharedRegion r;
  if (!removeSharedRegion(ptr, &r)) return false;
  munmap(r.base, r.bytes);
  close(r.fd);
  return true;
}

}  // namespace weft::core
