// ncclMemAlloc on a GPU: memory that peers on this host can map. Where the device supports
// virtual memory management (cuMem*) and POSIX fd handles, the allocation is cuMemCreate'd with
// an fd handle type, rounded to the driver's granularity, mapped, and made accessible to the
// device and every device that can access it (NCCL's ncclCuMemAlloc); elsewhere it is cuMemAlloc
// memory, which legacy CUDA IPC shares. Allocations are recorded process-wide (ncclMemFree takes
// only a pointer) so that ncclMemFree, the exporter (ipc.h) and registration find them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/common/error.h"
#include "src/cuda/driver_api.h"

namespace weft::transport::cuda {

using weft::cuda::DriverApi;

struct DeviceAllocation {
  void* base = nullptr;
  size_t bytes = 0;      // what is mapped: the request rounded up to the granularity
  size_t requested = 0;  // what the caller asked for
  int device = -1;
  bool cuMem = false;  // false: cuMemAlloc memory (no fd, legacy IPC only)
  weft::cuda::CuMemHandle handle = 0;
  int fd = -1;          // the exported POSIX fd, -1 where the device cannot export one
  uint64_t id = 0;      // unique in this process: the importer's cache key with the pid
  uint64_t secret = 0;  // what a peer shows the fd socket (fd_passing.h)
};

// The device of the calling thread's current CUDA context. False where the host path applies:
// no driver or no context entry points, CUDA not initialized, or no context current (a process
// that never used CUDA gets host memory, and no CUDA state is created for it).
bool currentContextDevice(const DriverApi* api, int* device);

// Allocates as the header says, without recording it. Every step that fails undoes the ones
// before it and returns kUnhandledCudaError (kSystemError for out of memory) with the step and
// the driver's result in *why.
Status createDeviceAllocation(const DriverApi& api, int device, size_t bytes, DeviceAllocation* out,
                              std::string* why);
// Undoes createDeviceAllocation (unmap, free the address range, release, close the fd).
void destroyDeviceAllocation(const DriverApi& api, const DeviceAllocation& a);

// The process-wide table, used by ncclMemAlloc / ncclMemFree.
void* allocateDeviceMemory(const DriverApi& api, int device, size_t bytes);  // throws Error
// False when `ptr` is not a base that allocateDeviceMemory returned (the caller then tries the
// host path); throws nothing.
bool freeDeviceMemory(const DriverApi& api, void* ptr);
// The recorded allocation containing `ptr` (anywhere inside it), or false.
bool findDeviceAllocation(const void* ptr, DeviceAllocation* out);
size_t deviceAllocationCount();

class FdServer;
// The process's fd server for cuMem exports, started at the first call; null and why where it
// cannot be started.
FdServer* exportFdServer(std::string* why);

}  // namespace weft::transport::cuda
