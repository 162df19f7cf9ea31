// The CUDA driver API entry points the library needs, loaded from libcuda.so.1 with dlopen so
// that libnccl.so.2 loads and runs host mode where no driver is installed. The table is plain
// function pointers so tests can hand the decision code a fake driver.
//
// Three entry points are required (a library without them is not a driver); every other one is
// optional, as NCCL treats them: a driver too old for cuMem* or cuLaunchHostFunc still serves
// the paths that do not need them, and the code that needs one says which is missing
// (missingEntryPoint).
#pragma once
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>

namespace weft::cuda {

// Values from cuda.h (the driver API's ABI, stable across releases).
using CuResult = int;
inline constexpr CuResult kCuSuccess = 0;
inline constexpr CuResult kCuErrorInvalidValue = 1;
inline constexpr CuResult kCuErrorOutOfMemory = 2;
inline constexpr CuResult kCuErrorNotInitialized = 3;
inline constexpr CuResult kCuErrorDeinitialized = 4;
inline constexpr CuResult kCuErrorNoDevice = 100;
inline constexpr CuResult kCuErrorInvalidDevice = 101;
inline constexpr CuResult kCuErrorInvalidContext = 201;
inline constexpr CuResult kCuErrorInvalidHandle = 400;
inline constexpr CuResult kCuErrorNotFound = 500;
inline constexpr CuResult kCuErrorNotReady = 600;
inline constexpr CuResult kCuErrorPeerAccessAlreadyEnabled = 704;
inline constexpr CuResult kCuErrorNotSupported = 801;

inline constexpr int kCuPointerAttributeContext = 1;        // CU_POINTER_ATTRIBUTE_CONTEXT
inline constexpr int kCuPointerAttributeMemoryType = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
inline constexpr int kCuPointerAttributeBufferId = 7;       // CU_POINTER_ATTRIBUTE_BUFFER_ID
inline constexpr int kCuPointerAttributeIsManaged = 8;      // CU_POINTER_ATTRIBUTE_IS_MANAGED
inline constexpr int kCuPointerAttributeDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
inline constexpr int kCuPointerAttributeLegacyIpcCapable = 10;    // ..._IS_LEGACY_CUDA_IPC_CAPABLE
inline constexpr int kCuPointerAttributeRangeStartAddr = 11;      // ..._RANGE_START_ADDR
inline constexpr int kCuPointerAttributeRangeSize = 12;           // ..._RANGE_SIZE
inline constexpr int kCuPointerAttributeAllowedHandleTypes = 14;  // ..._ALLOWED_HANDLE_TYPES
inline constexpr unsigned kCuMemoryTypeHost = 1;
inline constexpr unsigned kCuMemoryTypeDevice = 2;
inline constexpr unsigned kCuMemoryTypeArray = 3;
inline constexpr unsigned kCuMemoryTypeUnified = 4;
inline constexpr unsigned kCuMemHostAllocPortable = 0x01;   // CU_MEMHOSTALLOC_PORTABLE
inline constexpr unsigned kCuMemHostAllocDeviceMap = 0x02;  // CU_MEMHOSTALLOC_DEVICEMAP
inline constexpr unsigned kCuStreamWaitValueEq = 0x1;       // CU_STREAM_WAIT_VALUE_EQ
inline constexpr unsigned kCuStreamWriteValueDefault = 0;   // CU_STREAM_WRITE_VALUE_DEFAULT
inline constexpr int kCuStreamCaptureStatusNone = 0;        // CU_STREAM_CAPTURE_STATUS_NONE
inline constexpr int kCuStreamCaptureModeRelaxed = 2;       // CU_STREAM_CAPTURE_MODE_RELAXED

inline constexpr int kCuDeviceAttributeMultiprocessorCount = 16;  // ..._MULTIPROCESSOR_COUNT
inline constexpr int kCuDeviceAttributePciBusId = 33;             // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
inline constexpr int kCuDeviceAttributeVmmSupported =
    102;  // ..._VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
inline constexpr int kCuDeviceAttributePosixFdSupported =
    103;  // ..._HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
inline constexpr int kCuDeviceAttributeGpuDirectRdmaWithVmm =
    110;  // ..._GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED

inline constexpr int kCuMemHandleTypePosixFd = 0x1;     // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
inline constexpr int kCuMemAllocationTypePinned = 0x1;  // CU_MEM_ALLOCATION_TYPE_PINNED
inline constexpr int kCuMemLocationTypeDevice = 0x1;    // CU_MEM_LOCATION_TYPE_DEVICE
inline constexpr int kCuMemAccessProtReadWrite = 0x3;   // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
inline constexpr int kCuMemAllocGranularityMinimum = 0x0;  // CU_MEM_ALLOC_GRANULARITY_MINIMUM
inline constexpr int kCuMemAllocGranularityRecommended = 0x1;
inline constexpr unsigned kCuIpcMemLazyEnablePeerAccess =
    0x1;                                                // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
inline constexpr unsigned kCuEventDisableTiming = 0x2;  // CU_EVENT_DISABLE_TIMING
inline constexpr unsigned kCuEventDefault = 0x0;        // CU_EVENT_DEFAULT
inline constexpr unsigned kCuStreamNonBlocking = 0x1;   // CU_STREAM_NON_BLOCKING
inline constexpr size_t kCuIpcHandleSize = 64;          // CU_IPC_HANDLE_SIZE

using CuDevice = int;                         // CUdevice
using CuDevicePtr = unsigned long long;       // CUdeviceptr
using CuMemHandle = unsigned long long;       // CUmemGenericAllocationHandle
using CuContext = struct CuContextOpaque*;    // CUcontext
using CuStream = struct CuStreamOpaque*;      // CUstream
using CuEvent = struct CuEventOpaque*;        // CUevent
using CuHostFn = void (*)(void* userData);    // CUhostFn
using CuModule = struct CuModuleOpaque*;      // CUmodule
using CuFunction = struct CuFunctionOpaque*;  // CUfunction

struct CuMemLocation {  // CUmemLocation
  int type = 0;         // CUmemLocationType
  int id = 0;
};

struct CuMemAllocationProp {  // CUmemAllocationProp (v1)
  int type = 0;               // CUmemAllocationType
  int requestedHandleTypes = 0;
  CuMemLocation location;
  void* win32HandleMetaData = nullptr;
  struct {
    unsigned char compressionType = 0;
    unsigned char gpuDirectRDMACapable = 0;
    unsigned short usage = 0;
    unsigned char reserved[4] = {};
  } allocFlags;
};
static_assert(sizeof(CuMemAllocationProp) == 32, "CUmemAllocationProp layout");

struct CuMemAccessDesc {  // CUmemAccessDesc
  CuMemLocation location;
  int flags = 0;  // CUmemAccess_flags
};
static_assert(sizeof(CuMemAccessDesc) == 12, "CUmemAccessDesc layout");

struct CuIpcMemHandle {  // CUipcMemHandle, passed by value
  unsigned char reserved[kCuIpcHandleSize];
};

struct DriverApi {
  // Required.
  CuResult (*driverGetVersion)(int* version) = nullptr;
  // CUDA_ERROR_NOT_INITIALIZED until someone in the process called cuInit (cudart does).
  CuResult (*deviceGetCount)(int* count) = nullptr;
  // ptr is a CUdeviceptr (unsigned long long on every 64-bit platform).
  CuResult (*pointerGetAttribute)(void* data, int attribute, unsigned long long ptr) = nullptr;

  // Optional from here on: null where the driver lacks the symbol.
  CuResult (*init)(unsigned flags) = nullptr;
  CuResult (*getErrorName)(CuResult error, const char** name) = nullptr;
  CuResult (*deviceGet)(CuDevice* device, int ordinal) = nullptr;
  CuResult (*deviceGetAttribute)(int* value, int attribute, CuDevice device) = nullptr;
  CuResult (*deviceGetPciBusId)(char* busId, int length, CuDevice device) = nullptr;
  CuResult (*deviceCanAccessPeer)(int* can, CuDevice device, CuDevice peer) = nullptr;
  CuResult (*deviceGetByPciBusId)(CuDevice* device, const char* busId) = nullptr;
  // Lets the current context reach `peer`'s memory (a kernel here stores into it).
  CuResult (*ctxEnablePeerAccess)(CuContext peer, unsigned flags) = nullptr;
  CuResult (*ctxGetCurrent)(CuContext* context) = nullptr;
  CuResult (*ctxSetCurrent)(CuContext context) = nullptr;
  CuResult (*ctxGetDevice)(CuDevice* device) = nullptr;
  CuResult (*primaryCtxRetain)(CuContext* context, CuDevice device) = nullptr;
  CuResult (*primaryCtxRelease)(CuDevice device) = nullptr;  // cuDevicePrimaryCtxRelease_v2

  // Virtual memory management (cuMem*): ncclMemAlloc memory that peers can map.
  CuResult (*memCreate)(CuMemHandle* handle, size_t bytes, const CuMemAllocationProp* prop,
                        unsigned long long flags) = nullptr;
  CuResult (*memRelease)(CuMemHandle handle) = nullptr;
  CuResult (*memAddressReserve)(CuDevicePtr* ptr, size_t bytes, size_t alignment,
                                CuDevicePtr address, unsigned long long flags) = nullptr;
  CuResult (*memAddressFree)(CuDevicePtr ptr, size_t bytes) = nullptr;
  CuResult (*memMap)(CuDevicePtr ptr, size_t bytes, size_t offset, CuMemHandle handle,
                     unsigned long long flags) = nullptr;
  CuResult (*memUnmap)(CuDevicePtr ptr, size_t bytes) = nullptr;
  CuResult (*memSetAccess)(CuDevicePtr ptr, size_t bytes, const CuMemAccessDesc* desc,
                           size_t count) = nullptr;
  CuResult (*memExportToShareableHandle)(void* shareable, CuMemHandle handle, int handleType,
                                         unsigned long long flags) = nullptr;
  CuResult (*memImportFromShareableHandle)(CuMemHandle* handle, void* osHandle,
                                           int handleType) = nullptr;
  CuResult (*memGetAllocationGranularity)(size_t* granularity, const CuMemAllocationProp* prop,
                                          int option) = nullptr;
  CuResult (*memGetAddressRange)(CuDevicePtr* base, size_t* bytes,
                                 CuDevicePtr ptr) = nullptr;  // cuMemGetAddressRange_v2
  // Plain device memory, where the device lacks cuMem (cudaMalloc's kind).
  CuResult (*memAlloc)(CuDevicePtr* ptr, size_t bytes) = nullptr;  // cuMemAlloc_v2
  CuResult (*memFree)(CuDevicePtr ptr) = nullptr;                  // cuMemFree_v2
  // Synchronous copies (ordered after the legacy default stream's work), as cudaMemcpy.
  CuResult (*memcpyHtoD)(CuDevicePtr dst, const void* src,
                         size_t bytes) = nullptr;                              // cuMemcpyHtoD_v2
  CuResult (*memcpyDtoH)(void* dst, CuDevicePtr src, size_t bytes) = nullptr;  // cuMemcpyDtoH_v2

  // Legacy IPC (cudaMalloc memory).
  CuResult (*ipcGetMemHandle)(CuIpcMemHandle* handle, CuDevicePtr ptr) = nullptr;
  CuResult (*ipcOpenMemHandle)(CuDevicePtr* ptr, CuIpcMemHandle handle,
                               unsigned flags) = nullptr;  // cuIpcOpenMemHandle_v2
  CuResult (*ipcCloseMemHandle)(CuDevicePtr ptr) = nullptr;

  // Streams and events.
  CuResult (*streamCreate)(CuStream* stream, unsigned flags) = nullptr;
  CuResult (*streamDestroy)(CuStream stream) = nullptr;  // cuStreamDestroy_v2
  CuResult (*streamQuery)(CuStream stream) = nullptr;
  CuResult (*streamSynchronize)(CuStream stream) = nullptr;
  CuResult (*streamWaitEvent)(CuStream stream, CuEvent event, unsigned flags) = nullptr;
  CuResult (*launchHostFunc)(CuStream stream, CuHostFn fn, void* userData) = nullptr;
  CuResult (*eventCreate)(CuEvent* event, unsigned flags) = nullptr;
  CuResult (*eventRecord)(CuEvent event, CuStream stream) = nullptr;
  CuResult (*eventQuery)(CuEvent event) = nullptr;
  CuResult (*eventSynchronize)(CuEvent event) = nullptr;
  CuResult (*eventDestroy)(CuEvent event) = nullptr;  // cuEventDestroy_v2
  CuResult (*eventElapsedTime)(float* milliseconds, CuEvent start,
                               CuEvent end) = nullptr;  // cuEventElapsedTime_v2

  // Calls on device memory staged through pinned host memory, in stream order.
  CuResult (*memHostAlloc)(void** ptr, size_t bytes, unsigned flags) = nullptr;
  CuResult (*memFreeHost)(void* ptr) = nullptr;
  CuResult (*memHostGetDevicePointer)(CuDevicePtr* devicePtr, void* hostPtr,
                                      unsigned flags) = nullptr;  // _v2
  CuResult (*memcpyDtoHAsync)(void* dst, CuDevicePtr src, size_t bytes,
                              CuStream stream) = nullptr;  // _v2
  CuResult (*memcpyHtoDAsync)(CuDevicePtr dst, const void* src, size_t bytes,
                              CuStream stream) = nullptr;  // _v2
  CuResult (*streamWaitValue32)(CuStream stream, CuDevicePtr addr, unsigned value,
                                unsigned flags) = nullptr;  // _v2
  CuResult (*streamWriteValue32)(CuStream stream, CuDevicePtr addr, unsigned value,
                                 unsigned flags) = nullptr;  // _v2
  CuResult (*streamIsCapturing)(CuStream stream, int* status) = nullptr;
  // Lets this thread allocate while a stream of the process is being captured (optional).
  CuResult (*threadExchangeStreamCaptureMode)(int* mode) = nullptr;

  // Kernels from an image the library carries (the device interpreter, src/cuda/interp_launch.h),
  // and zeroing the device memory they use.
  CuResult (*moduleLoadData)(CuModule* module, const void* image) = nullptr;
  CuResult (*moduleUnload)(CuModule module) = nullptr;
  CuResult (*moduleGetFunction)(CuFunction* function, CuModule module, const char* name) = nullptr;
  CuResult (*launchKernel)(CuFunction function, unsigned gridDimX, unsigned gridDimY,
                           unsigned gridDimZ, unsigned blockDimX, unsigned blockDimY,
                           unsigned blockDimZ, unsigned sharedMemBytes, CuStream stream,
                           void** kernelParams, void** extra) = nullptr;
  CuResult (*memsetD8Async)(CuDevicePtr dst, unsigned char value, size_t count,
                            CuStream stream) = nullptr;
  CuResult (*memsetD8)(CuDevicePtr dst, unsigned char value,
                       size_t count) = nullptr;  // cuMemsetD8_v2
};

// The outcome of loading a driver library: `api` is null when the library or one of its
// required entry points is missing, and `why` then says which.
struct DriverLoad {
  std::unique_ptr<DriverApi> api;
  std::string why;
  void* handle = nullptr;  // dlopen handle, kept for the process's lifetime
};

// Loads `library` (a soname or path) now, without calling cuInit: loading the driver must not
// create CUDA state in a process that never asked for it (a forked child could not use CUDA).
DriverLoad loadDriver(const char* library);

// libcuda.so.1, loaded at the first call and kept for the process's lifetime.
const DriverLoad& driver();

// Groups of optional entry points, by what needs them.
enum class DriverFeature {
  kContext,    // cuCtxGetCurrent, cuCtxGetDevice, cuDeviceGet, cuDeviceGetAttribute
  kVmm,        // cuMemCreate ... cuMemGetAllocationGranularity, cuDeviceCanAccessPeer
  kLegacyIpc,  // cuIpcGetMemHandle, cuIpcOpenMemHandle_v2, cuIpcCloseMemHandle, range query
  kStreams,    // cuStreamQuery, cuLaunchHostFunc, cuEvent*
  kStaged,     // cuMemHostAlloc ... cuStreamIsCapturing: device calls run through host staging
  kKernels,    // cuModuleLoadData ... cuLaunchKernel, cuMemsetD8Async, cuMemsetD8_v2
};

// The first entry point of `feature` that `api` lacks (its driver symbol name), or "" when all
// are there. A null `api` lacks everything: "libcuda.so.1".
std::string missingEntryPoint(const DriverApi* api, DriverFeature feature);

// "CUDA_ERROR_OUT_OF_MEMORY (2)" style text for a result, asking the driver where it can.
std::string resultText(const DriverApi* api, CuResult rc);

}  // namespace weft::cuda
