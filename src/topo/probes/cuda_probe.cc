#include "src/topo/probes/cuda_probe.h"

#include <dlfcn.h>

#include <cstddef>

namespace weft::topo::probe {
namespace {

// The parts of the CUDA driver API (cuda.h) used here.
using CuResult = int;  // CUDA_SUCCESS = 0
using CuDevice = int;
constexpr CuResult kCudaSuccess = 0;
constexpr int kAttrCcMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

struct Cuda {
  void* handle = nullptr;
  CuResult (*init)(unsigned) = nullptr;
  CuResult (*getCount)(int*) = nullptr;
  CuResult (*get)(CuDevice*, int) = nullptr;
  CuResult (*getAttribute)(int*, int, CuDevice) = nullptr;
  CuResult (*getName)(char*, int, CuDevice) = nullptr;
  CuResult (*getPciBusId)(char*, int, CuDevice) = nullptr;
  CuResult (*totalMem)(size_t*, CuDevice) = nullptr;
  ~Cuda() {
    if (handle) dlclose(handle);
  }
};

template <typename F>
bool bind(void* h, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(h, name));
  return *fn != nullptr;
}

}  // namespace

bool probeCuda(std::vector<CudaGpu>* out, Report* report) {
  report->name = "cuda";
  report->ran = true;
  out->clear();
  Cuda c;
  c.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!c.handle) {
    report->detail = "libcuda.so.1 not found";
    return false;
  }
  bool ok = bind(c.handle, "cuInit", &c.init) && bind(c.handle, "cuDeviceGetCount", &c.getCount) &&
            bind(c.handle, "cuDeviceGet", &c.get) &&
            bind(c.handle, "cuDeviceGetAttribute", &c.getAttribute) &&
            bind(c.handle, "cuDeviceGetName", &c.getName) &&
            bind(c.handle, "cuDeviceGetPCIBusId", &c.getPciBusId) &&
            (bind(c.handle, "cuDeviceTotalMem_v2", &c.totalMem) ||
             bind(c.handle, "cuDeviceTotalMem", &c.totalMem));
  if (!ok) {
    report->detail = "libcuda.so.1 lacks a driver API entry point";
    return false;
  }
  report->available = true;
  CuResult rc = c.init(0);
  if (rc != kCudaSuccess) {
    report->detail = "cuInit failed (" + std::to_string(rc) + "): no usable CUDA device";
    return false;
  }
  int n = 0;
  if (c.getCount(&n) != kCudaSuccess) n = 0;
  for (int i = 0; i < n && i < 1024; ++i) {
    CuDevice dev;
    if (c.get(&dev, i) != kCudaSuccess) continue;
    CudaGpu g;
    g.ordinal = i;
    char bus[64] = {};
    if (c.getPciBusId(bus, sizeof(bus) - 1, dev) == kCudaSuccess) g.busId = normalizeBusId(bus);
    char name[256] = {};
    if (c.getName(name, sizeof(name) - 1, dev) == kCudaSuccess) g.name = name;
    int major = 0, minor = 0;
    if (c.getAttribute(&major, kAttrCcMajor, dev) == kCudaSuccess &&
        c.getAttribute(&minor, kAttrCcMinor, dev) == kCudaSuccess)
      g.sm = major * 10 + minor;
    size_t mem = 0;
    if (c.totalMem(&mem, dev) == kCudaSuccess) g.memoryBytes = static_cast<int64_t>(mem);
    out->push_back(std::move(g));
  }
  report->detail = std::to_string(out->size()) + " CUDA device(s)";
  return true;
}

}  // namespace weft::topo::probe
