#include "src/cuda/driver_api.h"

#include <dlfcn.h>

namespace weft::cuda {
namespace {

template <typename F>
bool bind(void* handle, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!*fn && missing->empty()) *missing = name;
  return *fn != nullptr;
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
  load.api = std::move(api);
  return load;
}

const DriverLoad& driver() {
  // Loaded once: the driver library is process-wide state, like the driver itself.
  static const DriverLoad load = loadDriver("libcuda.so.1");
  return load;
}

}  // namespace weft::cuda
