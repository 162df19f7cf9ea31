// CUDA IPC between processes of one host: the owner describes a device buffer in an
// IpcDescriptor (sent through the bootstrap), a peer maps it. ncclMemAlloc memory (cuMem with a
// POSIX fd handle) travels as the owner's fd, fetched with pidfd_getfd or the owner's fd socket
// (fd_passing.h); cudaMalloc memory as a legacy cuIpcGetMemHandle handle. A peer maps each
// allocation once (cached by owner pid and allocation id) and unmaps everything at close, which
// communicator destroy and abort call.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "src/common/error.h"
#include "src/cuda/driver_api.h"
#include "transports/cuda/fd_passing.h"
#include "transports/cuda/ipc_descriptor.h"

namespace weft::transport::cuda {

using weft::cuda::DriverApi;

// Describes [ptr, ptr + length) of device memory of this process for a peer. ncclMemAlloc
// memory gives kCuMemFd (and shares its fd with this process's fd socket); other device memory
// gives kLegacy, from the driver's range (cuMemGetAddressRange) and buffer id. Refuses
// (kInvalidArgument) a range that leaves its allocation, and says which entry point is missing
// where the driver lacks one.
Status exportDeviceBuffer(const DriverApi& api, const void* ptr, size_t length, IpcDescriptor* out,
                          std::string* why);

// The peer's side. Not copyable; one per communicator (or per process), used from any thread.
class IpcImporter {
 public:
  struct Options {
    std::chrono::milliseconds fdTimeout{10000};  // how long to wait for the owner's fd socket
    FdRoute route = FdRoute::kAny;
  };
  // Maps on `device` (the importer's GPU): the caller's current context must be on it.
  IpcImporter(const DriverApi& api, int device, Options options);
  ~IpcImporter();  // close()
  IpcImporter(const IpcImporter&) = delete;
  IpcImporter& operator=(const IpcImporter&) = delete;

  // This process's address of the descriptor's buffer (its offset applied), mapping the
  // allocation at the first descriptor that names it. A descriptor that disagrees with the
  // cached mapping of the same allocation (size, kind) is refused.
  Status map(const IpcDescriptor& d, void** ptr, std::string* why);
  // Unmaps every allocation (idempotent). Buffers from map() are invalid afterwards.
  void close();

  size_t mappedAllocations() const;
  size_t fdsFromSocket() const;  // how many fds came by the fallback route

 private:
  struct Mapping {
    IpcKind kind;
    uint64_t bytes;
    weft::cuda::CuDevicePtr base;
    weft::cuda::CuMemHandle handle;  // kCuMemFd
  };
  Status mapCuMem(const IpcDescriptor& d, Mapping* m, std::string* why);
  Status mapLegacy(const IpcDescriptor& d, Mapping* m, std::string* why);
  void unmap(const Mapping& m);

  const DriverApi& api_;
  const int device_;
  const Options options_;
  mutable std::mutex mu_;
  std::map<std::pair<int32_t, uint64_t>, Mapping> mappings_;  // (owner pid, allocation id)
  size_t fdsFromSocket_ = 0;
};

}  // namespace weft::transport::cuda
