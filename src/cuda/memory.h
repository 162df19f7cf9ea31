// ncclMemAlloc and ncclCommRegister's memory side.
// - Host mode: memfd-backed host memory (src/core/host_memory.h).
// - On a GPU (the calling thread's current CUDA context is on a device, NCCL's rule that
//   ncclMemAlloc allocates on the current device): cuMem memory with a POSIX fd handle that peers
//   map (transports/cuda/allocation.h), or cuMemAlloc memory where the device lacks cuMem.
#pragma once
#include <cstddef>

#include "src/cuda/driver_api.h"
#include "transports/cuda/ipc_descriptor.h"

namespace weft::cuda {

void* memAlloc(size_t bytes);  // throws weft::Error; asks cuda::driver()
void memFree(void* ptr);       // throws weft::Error for pointers memAlloc did not return
// The same with the driver table given (null: no driver), for tests.
void* memAlloc(const cuda::DriverApi* api, size_t bytes);
void memFree(const cuda::DriverApi* api, void* ptr);

// A registered device buffer: its range and the descriptor peers map it with (once per
// allocation: the importer caches by owner pid and allocation id).
struct DeviceRegistration {
  const void* buff = nullptr;
  size_t size = 0;
  transport::cuda::IpcDescriptor descriptor;
};

// ncclCommRegister's device branch. When `buff` is device memory (not managed memory, which no
// IPC shares), records its registration under `owner` (the communicator) and returns true;
// returns false for host memory, which keeps the host path. Throws weft::Error when the device
// buffer cannot be exported (the message says why).
bool registerDeviceBuffer(const void* owner, const cuda::DriverApi* api, const void* buff,
                          size_t size);
// Drops the registration with handle `buff` under `owner`; false when there is none.
bool deregisterDeviceBuffer(const void* owner, const void* buff);
// The registration under `owner` whose buffer contains [ptr, ptr + bytes), or false.
bool findDeviceRegistration(const void* owner, const void* ptr, size_t bytes,
                            DeviceRegistration* out);
size_t deviceRegistrationCount(const void* owner);
// Forgets every registration under `owner` (communicator destroy / abort).
void dropDeviceRegistrations(const void* owner);

}  // namespace weft::cuda
