#include "src/cuda/driver_api.h"

#include <dlfcn.h>

#include "src/common/env.h"

namespace weft::cuda {
namespace {

template <typename F>
bool bind(void* handle, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!*fn && missing->empty()) *missing = name;
  return *fn != nullptr;
}

// An optional entry point: null where the driver lacks it. Versioned names first (cuda.h maps
// the plain name to them), the plain name where an older driver has only that.
template <typename F>
void bindOptional(void* handle, std::initializer_list<const char*> names, F* fn) {
  *fn = nullptr;
  for (const char* name : names) {
    *fn = reinterpret_cast<F>(dlsym(handle, name));
    if (*fn) return;
  }
}

void bindOptionalEntryPoints(void* h, DriverApi* api) {
  bindOptional(h, {"cuInit"}, &api->init);
  bindOptional(h, {"cuGetErrorName"}, &api->getErrorName);
  bindOptional(h, {"cuDeviceGet"}, &api->deviceGet);
  bindOptional(h, {"cuDeviceGetAttribute"}, &api->deviceGetAttribute);
  bindOptional(h, {"cuDeviceGetPCIBusId"}, &api->deviceGetPciBusId);
  bindOptional(h, {"cuDeviceCanAccessPeer"}, &api->deviceCanAccessPeer);
  bindOptional(h, {"cuDeviceGetByPCIBusId"}, &api->deviceGetByPciBusId);
  bindOptional(h, {"cuCtxEnablePeerAccess"}, &api->ctxEnablePeerAccess);
  bindOptional(h, {"cuCtxGetCurrent"}, &api->ctxGetCurrent);
  bindOptional(h, {"cuCtxSetCurrent"}, &api->ctxSetCurrent);
  bindOptional(h, {"cuCtxGetDevice"}, &api->ctxGetDevice);
  bindOptional(h, {"cuDevicePrimaryCtxRetain"}, &api->primaryCtxRetain);
  bindOptional(h, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
               &api->primaryCtxRelease);
  bindOptional(h, {"cuMemCreate"}, &api->memCreate);
  bindOptional(h, {"cuMemRelease"}, &api->memRelease);
  bindOptional(h, {"cuMemAddressReserve"}, &api->memAddressReserve);
  bindOptional(h, {"cuMemAddressFree"}, &api->memAddressFree);
  bindOptional(h, {"cuMemMap"}, &api->memMap);
  bindOptional(h, {"cuMemUnmap"}, &api->memUnmap);
  bindOptional(h, {"cuMemSetAccess"}, &api->memSetAccess);
  bindOptional(h, {"cuMemExportToShareableHandle"}, &api->memExportToShareableHandle);
  bindOptional(h, {"cuMemImportFromShareableHandle"}, &api->memImportFromShareableHandle);
  bindOptional(h, {"cuMemGetAllocationGranularity"}, &api->memGetAllocationGranularity);
  bindOptional(h, {"cuMemGetAddressRange_v2"}, &api->memGetAddressRange);
  bindOptional(h, {"cuMemAlloc_v2"}, &api->memAlloc);
  bindOptional(h, {"cuMemFree_v2"}, &api->memFree);
  bindOptional(h, {"cuMemcpyHtoD_v2"}, &api->memcpyHtoD);
  bindOptional(h, {"cuMemcpyDtoH_v2"}, &api->memcpyDtoH);
  bindOptional(h, {"cuIpcGetMemHandle"}, &api->ipcGetMemHandle);
  bindOptional(h, {"cuIpcOpenMemHandle_v2"}, &api->ipcOpenMemHandle);
  bindOptional(h, {"cuIpcCloseMemHandle"}, &api->ipcCloseMemHandle);
  bindOptional(h, {"cuStreamCreate"}, &api->streamCreate);
  bindOptional(h, {"cuStreamDestroy_v2", "cuStreamDestroy"}, &api->streamDestroy);
  bindOptional(h, {"cuStreamQuery"}, &api->streamQuery);
  bindOptional(h, {"cuStreamSynchronize"}, &api->streamSynchronize);
  bindOptional(h, {"cuStreamWaitEvent"}, &api->streamWaitEvent);
  bindOptional(h, {"cuLaunchHostFunc"}, &api->launchHostFunc);
  bindOptional(h, {"cuEventCreate"}, &api->eventCreate);
  bindOptional(h, {"cuEventRecord"}, &api->eventRecord);
  bindOptional(h, {"cuEventQuery"}, &api->eventQuery);
  bindOptional(h, {"cuEventSynchronize"}, &api->eventSynchronize);
  bindOptional(h, {"cuEventDestroy_v2", "cuEventDestroy"}, &api->eventDestroy);
  bindOptional(h, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, &api->eventElapsedTime);
  bindOptional(h, {"cuMemHostAlloc"}, &api->memHostAlloc);
  bindOptional(h, {"cuMemFreeHost"}, &api->memFreeHost);
  bindOptional(h, {"cuMemHostGetDevicePointer_v2"}, &api->memHostGetDevicePointer);
  bindOptional(h, {"cuMemcpyDtoHAsync_v2"}, &api->memcpyDtoHAsync);
  bindOptional(h, {"cuMemcpyHtoDAsync_v2"}, &api->memcpyHtoDAsync);
  bindOptional(h, {"cuStreamWaitValue32_v2"}, &api->streamWaitValue32);
  bindOptional(h, {"cuStreamWriteValue32_v2"}, &api->streamWriteValue32);
  bindOptional(h, {"cuStreamIsCapturing"}, &api->streamIsCapturing);
  bindOptional(h, {"cuThreadExchangeStreamCaptureMode"}, &api->threadExchangeStreamCaptureMode);
  bindOptional(h, {"cuModuleLoadData"}, &api->moduleLoadData);
  bindOptional(h, {"cuModuleUnload"}, &api->moduleUnload);
  bindOptional(h, {"cuModuleGetFunction"}, &api->moduleGetFunction);
  bindOptional(h, {"cuLaunchKernel"}, &api->launchKernel);
  bindOptional(h, {"cuMemsetD8Async"}, &api->memsetD8Async);
  bindOptional(h, {"cuMemsetD8_v2"}, &api->memsetD8);
}

struct EntryPoint {
  const char* name;
  bool present;
};

std::string firstMissing(std::initializer_list<EntryPoint> points) {
  for (const EntryPoint& p : points)
    if (!p.present) return p.name;
  return "";
}

}  // namespace

DriverLoad loadDriver(const char* library) {
  DriverLoad load;
  load.handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!load.handle) {
    const char* err = dlerror();
    load.why = std::string(library) + " not loaded (" + (err ? err : "unknown error") +
               "): no CUDA driver";
    return load;
  }
  auto api = std::make_unique<DriverApi>();
  std::string missing;
  bool ok = bind(load.handle, "cuDriverGetVersion", &api->driverGetVersion, &missing);
  ok = bind(load.handle, "cuDeviceGetCount", &api->deviceGetCount, &missing) && ok;
  ok = bind(load.handle, "cuPointerGetAttribute", &api->pointerGetAttribute, &missing) && ok;
  if (!ok) {
    load.why = std::string(library) + " lacks " + missing + ": not a usable CUDA driver";
    dlclose(load.handle);
    load.handle = nullptr;
    return load;
  }
  bindOptionalEntryPoints(load.handle, api.get());
  load.api = std::move(api);
  return load;
}

const DriverLoad& driver() {
  // Loaded once: the driver library is process-wide state, like the driver itself.
  static const DriverLoad load = loadDriver(env::get("WEFT_CUDA_DRIVER").c_str());
  return load;
}

std::string missingEntryPoint(const DriverApi* api, DriverFeature feature) {
  if (!api) return "libcuda.so.1";
  const DriverApi& a = *api;
  switch (feature) {
    case DriverFeature::kContext:
      return firstMissing({{"cuCtxGetCurrent", a.ctxGetCurrent != nullptr},
                           {"cuCtxGetDevice", a.ctxGetDevice != nullptr},
                           {"cuDeviceGet", a.deviceGet != nullptr},
                           {"cuDeviceGetAttribute", a.deviceGetAttribute != nullptr}});
    case DriverFeature::kVmm:
      return firstMissing(
          {{"cuMemCreate", a.memCreate != nullptr},
           {"cuMemRelease", a.memRelease != nullptr},
           {"cuMemAddressReserve", a.memAddressReserve != nullptr},
           {"cuMemAddressFree", a.memAddressFree != nullptr},
           {"cuMemMap", a.memMap != nullptr},
           {"cuMemUnmap", a.memUnmap != nullptr},
           {"cuMemSetAccess", a.memSetAccess != nullptr},
           {"cuMemExportToShareableHandle", a.memExportToShareableHandle != nullptr},
           {"cuMemImportFromShareableHandle", a.memImportFromShareableHandle != nullptr},
           {"cuMemGetAllocationGranularity", a.memGetAllocationGranularity != nullptr},
           {"cuDeviceCanAccessPeer", a.deviceCanAccessPeer != nullptr}});
    case DriverFeature::kLegacyIpc:
      return firstMissing({{"cuIpcGetMemHandle", a.ipcGetMemHandle != nullptr},
                           {"cuIpcOpenMemHandle_v2", a.ipcOpenMemHandle != nullptr},
                           {"cuIpcCloseMemHandle", a.ipcCloseMemHandle != nullptr},
                           {"cuMemGetAddressRange_v2", a.memGetAddressRange != nullptr}});
    case DriverFeature::kStreams:
      return firstMissing({{"cuStreamQuery", a.streamQuery != nullptr},
                           {"cuLaunchHostFunc", a.launchHostFunc != nullptr},
                           {"cuEventCreate", a.eventCreate != nullptr},
                           {"cuEventRecord", a.eventRecord != nullptr},
                           {"cuEventQuery", a.eventQuery != nullptr},
                           {"cuEventDestroy_v2", a.eventDestroy != nullptr}});
    case DriverFeature::kStaged:
      return firstMissing({{"cuLaunchHostFunc", a.launchHostFunc != nullptr},
                           {"cuMemHostAlloc", a.memHostAlloc != nullptr},
                           {"cuMemFreeHost", a.memFreeHost != nullptr},
                           {"cuMemHostGetDevicePointer_v2", a.memHostGetDevicePointer != nullptr},
                           {"cuMemcpyDtoHAsync_v2", a.memcpyDtoHAsync != nullptr},
                           {"cuMemcpyHtoDAsync_v2", a.memcpyHtoDAsync != nullptr},
                           {"cuStreamWaitValue32_v2", a.streamWaitValue32 != nullptr},
                           {"cuStreamWriteValue32_v2", a.streamWriteValue32 != nullptr},
                           {"cuStreamIsCapturing", a.streamIsCapturing != nullptr}});
    case DriverFeature::kKernels:
      return firstMissing({{"cuModuleLoadData", a.moduleLoadData != nullptr},
                           {"cuModuleUnload", a.moduleUnload != nullptr},
                           {"cuModuleGetFunction", a.moduleGetFunction != nullptr},
                           {"cuLaunchKernel", a.launchKernel != nullptr},
                           {"cuMemsetD8Async", a.memsetD8Async != nullptr},
                           {"cuMemsetD8_v2", a.memsetD8 != nullptr}});
  }
  return "";
}

std::string resultText(const DriverApi* api, CuResult rc) {
  const char* name = nullptr;
  if (api && api->getErrorName && api->getErrorName(rc, &name) == kCuSuccess && name)
    return std::string(name) + " (" + std::to_string(rc) + ")";
  return "CUresult " + std::to_string(rc);
}

}  // namespace weft::cuda
