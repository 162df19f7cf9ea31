// The CUDA driver API entry points the library needs, loaded from libcuda.so.1 with dlopen so
// that libnccl.so.2 loads and runs host mode where no driver is installed. The table is plain
// function pointers so tests can hand the decision code a fake driver.
#pragma once
#include <memory>
#include <string>

namespace weft::cuda {

// Values from cuda.h (the driver API's ABI, stable across releases).
using CuResult = int;
inline constexpr CuResult kCuSuccess = 0;
inline constexpr CuResult kCuErrorInvalidValue = 1;
inline constexpr CuResult kCuErrorNotInitialized = 3;
inline constexpr CuResult kCuErrorNoDevice = 100;
inline constexpr int kCuPointerAttributeMemoryType = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
inline constexpr int kCuPointerAttributeIsManaged = 8;      // CU_POINTER_ATTRIBUTE_IS_MANAGED
inline constexpr int kCuPointerAttributeDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
inline constexpr unsigned kCuMemoryTypeHost = 1;
inline constexpr unsigned kCuMemoryTypeDevice = 2;
inline constexpr unsigned kCuMemoryTypeArray = 3;
inline constexpr unsigned kCuMemoryTypeUnified = 4;

struct DriverApi {
  CuResult (*driverGetVersion)(int* version) = nullptr;
  // CUDA_ERROR_NOT_INITIALIZED until someone in the process called cuInit (cudart does).
  CuResult (*deviceGetCount)(int* count) = nullptr;
  // ptr is a CUdeviceptr (unsigned long long on every 64-bit platform).
  CuResult (*pointerGetAttribute)(void* data, int attribute, unsigned long long ptr) = nullptr;
};

// The outcome of loading a driver library: `api` is null when the library or one of its entry
// points is missing, and `why` then says which.
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

}  // namespace weft::cuda
