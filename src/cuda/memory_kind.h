// Which memory a call's buffers are in, and so which path the call takes: host memory runs on the
// host executor, device memory on the CUDA path. Decided per call from the driver's pointer
// attributes, as NCCL users expect to pass whatever buffers they have.
#pragma once
#include <span>
#include <string>

#include "src/common/error.h"
#include "src/cuda/driver_api.h"

namespace weft::cuda {

enum class MemoryKind {
  kHost,     // pageable or pinned host memory, or anything the driver does not know
  kDevice,   // device memory (cudaMalloc, cuMem*): the host must not touch it
  kManaged,  // managed (unified) memory: both sides may touch it
};

struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  // the owning GPU's ordinal for device and managed memory
};

// Asks the driver about `ptr`. Without a driver, or before CUDA is initialized in this process
// (no device memory can exist then), every pointer is host memory.
PointerInfo classifyPointer(const DriverApi* api, const void* ptr);

enum class ExecPath { kHost, kDevice };

// One buffer a call reads or writes, named for error messages ("sendbuff").
struct CallBuffer {
  const char* name;
  const void* ptr;  // null buffers (count 0, or unused on this rank) are skipped
};

// Where a call runs, and on which GPU.
struct Route {
  ExecPath path = ExecPath::kHost;
  int device = -1;  // for ExecPath::kDevice
};

// Chooses the path for a call with `buffers` and `stream` (null, a Weft host stream when
// `hostStream`, else a cudaStream_t):
// - all host memory, stream null or a host stream: the host path;
// - all device (or managed) memory on one GPU, stream null (the legacy default stream) or a
//   cudaStream_t: the CUDA path;
// - managed memory alone follows the stream: the CUDA path with a cudaStream_t, else the host;
// - host and device memory mixed, device memory on two GPUs, device memory with a host stream,
//   host memory with a cudaStream_t: kInvalidArgument;
// - a cudaStream_t where there is no driver, CUDA is not initialized or there is no device:
//   kInvalidArgument, with a message that starts "no CUDA device".
// `driver` is driver() in the library, a fake in tests.
Status chooseRoute(const DriverLoad& driver, std::span<const CallBuffer> buffers,
                   const void* stream, bool hostStream, Route* route, std::string* why);

}  // namespace weft::cuda
