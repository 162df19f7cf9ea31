// Loading the driver table where libcuda is absent or is not a driver, and what the code that
// needs an optional entry point is told when it is missing.
#include <gtest/gtest.h>

#include "src/cuda/driver_api.h"

namespace weft::cuda {
namespace {

TEST(DriverTable, AbsentLibrarySaysThereIsNoDriver) {
  const DriverLoad load = loadDriver("libweft-no-such-cuda.so.1");
  EXPECT_FALSE(load.api);
  EXPECT_EQ(load.handle, nullptr);
  EXPECT_NE(load.why.find("libweft-no-such-cuda.so.1 not loaded"), std::string::npos) << load.why;
  EXPECT_NE(load.why.find("no CUDA driver"), std::string::npos) << load.why;
}

TEST(DriverTable, LibraryWithoutTheDriverApiIsRefusedByName) {
  const DriverLoad load = loadDriver("libc.so.6");
  EXPECT_FALSE(load.api);
  EXPECT_NE(load.why.find("lacks cuDriverGetVersion"), std::string::npos) << load.why;
  EXPECT_NE(load.why.find("not a usable CUDA driver"), std::string::npos) << load.why;
}

TEST(DriverTable, MissingOptionalEntryPointsAreNamed) {
  EXPECT_EQ(missingEntryPoint(nullptr, DriverFeature::kVmm), "libcuda.so.1");
  DriverApi empty;
  EXPECT_EQ(missingEntryPoint(&empty, DriverFeature::kContext), "cuCtxGetCurrent");
  EXPECT_EQ(missingEntryPoint(&empty, DriverFeature::kVmm), "cuMemCreate");
  EXPECT_EQ(missingEntryPoint(&empty, DriverFeature::kLegacyIpc), "cuIpcGetMemHandle");
  EXPECT_EQ(missingEntryPoint(&empty, DriverFeature::kStreams), "cuStreamQuery");
  EXPECT_EQ(missingEntryPoint(&empty, DriverFeature::kKernels), "cuModuleLoadData");
  DriverApi partial;
  partial.memCreate = [](CuMemHandle*, size_t, const CuMemAllocationProp*, unsigned long long) {
    return kCuSuccess;
  };
  EXPECT_EQ(missingEntryPoint(&partial, DriverFeature::kVmm), "cuMemRelease");
  DriverApi kernels;
  kernels.moduleLoadData = [](CuModule*, const void*) { return kCuSuccess; };
  kernels.moduleUnload = [](CuModule) { return kCuSuccess; };
  kernels.moduleGetFunction = [](CuFunction*, CuModule, const char*) { return kCuSuccess; };
  kernels.launchKernel = [](CuFunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CuStream, void**, void**) { return kCuSuccess; };
  EXPECT_EQ(missingEntryPoint(&kernels, DriverFeature::kKernels), "cuMemsetD8Async");
  kernels.memsetD8Async = [](CuDevicePtr, unsigned char, size_t, CuStream) { return kCuSuccess; };
  EXPECT_EQ(missingEntryPoint(&kernels, DriverFeature::kKernels), "cuMemsetD8_v2");
  kernels.memsetD8 = [](CuDevicePtr, unsigned char, size_t) { return kCuSuccess; };
  EXPECT_EQ(missingEntryPoint(&kernels, DriverFeature::kKernels), "");
  EXPECT_EQ(resultText(&empty, kCuErrorOutOfMemory), "CUresult 2");
  DriverApi named;
  named.getErrorName = [](CuResult, const char** name) {
    *name = "CUDA_ERROR_OUT_OF_MEMORY";
    return kCuSuccess;
  };
  EXPECT_EQ(resultText(&named, kCuErrorOutOfMemory), "CUDA_ERROR_OUT_OF_MEMORY (2)");
}

#ifdef WEFT_CUDA_STUB_DRIVER
// The toolkit's stub libcuda.so exports every symbol (each call fails): the whole table binds,
// versioned names included, without a GPU.
TEST(DriverTable, StubDriverBindsEveryEntryPoint) {
  const DriverLoad load = loadDriver(WEFT_CUDA_STUB_DRIVER);
  ASSERT_TRUE(load.api) << load.why;
  for (DriverFeature f : {DriverFeature::kContext, DriverFeature::kVmm, DriverFeature::kLegacyIpc,
                          DriverFeature::kStreams, DriverFeature::kKernels})
    EXPECT_EQ(missingEntryPoint(load.api.get(), f), "") << static_cast<int>(f);
  EXPECT_NE(load.api->primaryCtxRelease, nullptr);
  EXPECT_NE(load.api->memAlloc, nullptr);
  EXPECT_NE(load.api->eventSynchronize, nullptr);
  EXPECT_NE(load.api->launchKernel, nullptr);
}
#endif

#ifdef WEFT_HAVE_CUDA_H
}  // namespace
}  // namespace weft::cuda
#include <cuda.h>

#include <cstddef>
#include <type_traits>
namespace weft::cuda {
namespace {

// Two function pointer types call alike: as many parameters, each (and the result) of the same
// size and the same kind (pointer or not). The table's CuResult is cuda.h's CUresult enum, its
// opaque handles cuda.h's struct pointers, so the types themselves differ.
template <class RA, class... A, class RB, class... B>
constexpr bool sameCall(RA (*)(A...), RB (*)(B...)) {
  if constexpr (sizeof...(A) != sizeof...(B))
    return false;
  else
    return sizeof(RA) == sizeof(RB) &&
           ((sizeof(A) == sizeof(B) && std::is_pointer_v<A> == std::is_pointer_v<B>)&&...);
}
template <class A, class B>
inline constexpr bool kSameCall = sameCall(A{}, B{});

static_assert(kSameCall<decltype(DriverApi::moduleLoadData), decltype(&cuModuleLoadData)>);
static_assert(kSameCall<decltype(DriverApi::moduleUnload), decltype(&cuModuleUnload)>);
static_assert(kSameCall<decltype(DriverApi::moduleGetFunction), decltype(&cuModuleGetFunction)>);
static_assert(kSameCall<decltype(DriverApi::launchKernel), decltype(&cuLaunchKernel)>);
static_assert(kSameCall<decltype(DriverApi::memsetD8Async), decltype(&cuMemsetD8Async)>);
static_assert(kSameCall<decltype(DriverApi::memsetD8), decltype(&cuMemsetD8_v2)>);
static_assert(kSameCall<decltype(DriverApi::streamWaitValue32), decltype(&cuStreamWaitValue32_v2)>);
static_assert(
    kSameCall<decltype(DriverApi::deviceGetByPciBusId), decltype(&cuDeviceGetByPCIBusId)>);
static_assert(
    kSameCall<decltype(DriverApi::ctxEnablePeerAccess), decltype(&cuCtxEnablePeerAccess)>);
static_assert(kSameCall<decltype(DriverApi::deviceGetPciBusId), decltype(&cuDeviceGetPCIBusId)>);
// The check itself tells signatures apart.
static_assert(!kSameCall<decltype(DriverApi::memsetD8), decltype(&cuMemsetD8Async)>);
static_assert(!kSameCall<decltype(DriverApi::moduleUnload), decltype(&cuModuleLoadData)>);
static_assert(!kSameCall<CuResult (*)(size_t), decltype(&cuModuleUnload)>);
// The hand-written ABI values and layouts against the toolkit's header (a build failure here
// means driver_api.h disagrees with cuda.h).
static_assert(sizeof(CuMemAllocationProp) == sizeof(CUmemAllocationProp));
static_assert(offsetof(CuMemAllocationProp, location) == offsetof(CUmemAllocationProp, location));
static_assert(offsetof(CuMemAllocationProp, allocFlags) ==
              offsetof(CUmemAllocationProp, allocFlags));
static_assert(sizeof(CuMemAccessDesc) == sizeof(CUmemAccessDesc));
static_assert(offsetof(CuMemAccessDesc, flags) == offsetof(CUmemAccessDesc, flags));
static_assert(sizeof(CuIpcMemHandle) == sizeof(CUipcMemHandle));
static_assert(kCuMemHandleTypePosixFd == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
static_assert(kCuMemAllocationTypePinned == CU_MEM_ALLOCATION_TYPE_PINNED);
static_assert(kCuMemLocationTypeDevice == CU_MEM_LOCATION_TYPE_DEVICE);
static_assert(kCuMemAccessProtReadWrite == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
static_assert(kCuMemAllocGranularityRecommended == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
static_assert(kCuDeviceAttributeMultiprocessorCount == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(kCuDeviceAttributeVmmSupported ==
              CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
static_assert(kCuDeviceAttributePosixFdSupported ==
              CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
static_assert(kCuDeviceAttributeGpuDirectRdmaWithVmm ==
              CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED);
static_assert(kCuPointerAttributeBufferId == CU_POINTER_ATTRIBUTE_BUFFER_ID);
static_assert(kCuPointerAttributeRangeStartAddr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
static_assert(kCuIpcMemLazyEnablePeerAccess == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
static_assert(kCuErrorNotReady == CUDA_ERROR_NOT_READY);
static_assert(kCuErrorNotSupported == CUDA_ERROR_NOT_SUPPORTED);
static_assert(kCuErrorNotFound == CUDA_ERROR_NOT_FOUND);
static_assert(kCuErrorInvalidHandle == CUDA_ERROR_INVALID_HANDLE);
static_assert(kCuEventDisableTiming == CU_EVENT_DISABLE_TIMING);
#endif

}  // namespace
}  // namespace weft::cuda
