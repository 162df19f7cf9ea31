#include "perf/device.h"

#include <cstdint>
#include <cstdlib>
#include <initializer_list>

#include "perf/failure.h"
#include "perf/roofline.h"

namespace weft::perf {
namespace {

using cuda::CuResult;
using cuda::kCuSuccess;

// The two device attributes the roofline's bandwidth comes from (CUDA's CUdevice_attribute).
constexpr int kCuDeviceAttributeMemoryClockRate = 36;       // ..._MEMORY_CLOCK_RATE, kHz
constexpr int kCuDeviceAttributeGlobalMemoryBusWidth = 37;  // ..._GLOBAL_MEMORY_BUS_WIDTH, bits

cuda::CuDevicePtr devicePtr(const void* p) {
  return static_cast<cuda::CuDevicePtr>(reinterpret_cast<uintptr_t>(p));
}

struct EntryPoint {
  const char* name;
  bool present;
};

// The first entry point the tools' device mode needs that `a` lacks, or "".
std::string missingForTools(const cuda::DriverApi& a) {
  for (const EntryPoint& p : std::initializer_list<EntryPoint>{
           {"cuInit", a.init != nullptr},
           {"cuDeviceGet", a.deviceGet != nullptr},
           {"cuDevicePrimaryCtxRetain", a.primaryCtxRetain != nullptr},
           {"cuDevicePrimaryCtxRelease_v2", a.primaryCtxRelease != nullptr},
           {"cuCtxSetCurrent", a.ctxSetCurrent != nullptr},
           {"cuMemAlloc_v2", a.memAlloc != nullptr},
           {"cuMemFree_v2", a.memFree != nullptr},
           {"cuMemcpyHtoD_v2", a.memcpyHtoD != nullptr},
           {"cuMemcpyDtoH_v2", a.memcpyDtoH != nullptr},
           {"cuStreamCreate", a.streamCreate != nullptr},
           {"cuStreamDestroy_v2", a.streamDestroy != nullptr},
           {"cuStreamSynchronize", a.streamSynchronize != nullptr},
           {"cuEventCreate", a.eventCreate != nullptr},
           {"cuEventRecord", a.eventRecord != nullptr},
           {"cuEventSynchronize", a.eventSynchronize != nullptr},
           {"cuEventElapsedTime_v2", a.eventElapsedTime != nullptr},
           {"cuEventDestroy_v2", a.eventDestroy != nullptr}})
    if (!p.present) return p.name;
  // What the library itself needs to run calls on device memory.
  return cuda::missingEntryPoint(&a, cuda::DriverFeature::kStaged);
}

}  // namespace

std::unique_ptr<DeviceRuntime> DeviceRuntime::open(std::string* why) {
  const cuda::DriverLoad& load = cuda::driver();
  if (!load.api) {
    *why = load.why;
    return nullptr;
  }
  const cuda::DriverApi& api = *load.api;
  if (std::string missing = missingForTools(api); !missing.empty()) {
    *why = "the CUDA driver lacks " + missing;
    return nullptr;
  }
  if (CuResult rc = api.init(0); rc != kCuSuccess) {
    *why = "no CUDA device: cuInit failed with " + cuda::resultText(&api, rc);
    return nullptr;
  }
  std::unique_ptr<DeviceRuntime> rt(new DeviceRuntime(api));
  if (CuResult rc = api.deviceGetCount(&rt->count_); rc != kCuSuccess || rt->count_ < 1) {
    *why = "no CUDA device: cuDeviceGetCount " +
           (rc != kCuSuccess ? "failed with " + cuda::resultText(&api, rc) : "found none");
    return nullptr;
  }
  if (api.driverGetVersion(&rt->version_) != kCuSuccess) rt->version_ = 0;
  return rt;
}

DeviceRuntime::~DeviceRuntime() {
  for (const auto& [ordinal, context] : contexts_) {
    cuda::CuDevice dev = 0;
    if (api_.deviceGet(&dev, ordinal) == kCuSuccess) api_.primaryCtxRelease(dev);
  }
}

void DeviceRuntime::check(CuResult rc, const char* what) const {
  if (rc != kCuSuccess)
    die(std::string("CUDA driver call ") + what + " failed: " + cuda::resultText(&api_, rc));
}

int DeviceRuntime::ordinalFor(int firstDevice, int slot) const {
  return (firstDevice + slot) % count_;
}

void DeviceRuntime::retain(int ordinal) {
  if (contexts_.count(ordinal)) return;
  cuda::CuDevice dev = 0;
  check(api_.deviceGet(&dev, ordinal), "cuDeviceGet");
  cuda::CuContext ctx = nullptr;
  check(api_.primaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  contexts_[ordinal] = ctx;
}

void DeviceRuntime::use(int ordinal) const {
  auto it = contexts_.find(ordinal);
  if (it == contexts_.end()) die("device " + std::to_string(ordinal) + " has no context");
  check(api_.ctxSetCurrent(it->second), "cuCtxSetCurrent");
}

std::string DeviceRuntime::busId(int ordinal) const {
  cuda::CuDevice dev = 0;
  char bus[32] = {};
  if (!api_.deviceGetPciBusId || api_.deviceGet(&dev, ordinal) != kCuSuccess ||
      api_.deviceGetPciBusId(bus, sizeof bus - 1, dev) != kCuSuccess)
    return "";
  return bus;
}

double DeviceRuntime::memoryGBps(int ordinal, std::string* source) const {
  cuda::CuDevice dev = 0;
  int clockKHz = 0, busBits = 0;
  if (!api_.deviceGetAttribute || api_.deviceGet(&dev, ordinal) != kCuSuccess ||
      api_.deviceGetAttribute(&clockKHz, kCuDeviceAttributeMemoryClockRate, dev) != kCuSuccess ||
      api_.deviceGetAttribute(&busBits, kCuDeviceAttributeGlobalMemoryBusWidth, dev) !=
          kCuSuccess) {
    *source = "the driver does not give the memory clock and bus width";
    return 0;
  }
  const double gbps = hbmGBps(clockKHz, busBits);
  *source = gbps > 0 ? "driver: " + std::to_string(clockKHz / 1000) + " MHz x " +
                           std::to_string(busBits) + " bit, double data rate"
                     : "the driver gives no memory clock or bus width";
  return gbps;
}

void* DeviceRuntime::alloc(size_t bytes) const {
  cuda::CuDevicePtr p = 0;
  check(api_.memAlloc(&p, bytes), "cuMemAlloc_v2");
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

void DeviceRuntime::release(void* device) const {
  if (device) check(api_.memFree(devicePtr(device)), "cuMemFree_v2");
}

void DeviceRuntime::toDevice(void* device, const void* host, size_t bytes) const {
  if (bytes) check(api_.memcpyHtoD(devicePtr(device), host, bytes), "cuMemcpyHtoD_v2");
}

void DeviceRuntime::toHost(void* host, const void* device, size_t bytes) const {
  if (bytes) check(api_.memcpyDtoH(host, devicePtr(device), bytes), "cuMemcpyDtoH_v2");
}

cudaStream_t DeviceRuntime::createStream() const {
  cuda::CuStream s = nullptr;
  // Non-blocking, as nccl-tests creates its streams: no implicit sync with the legacy stream.
  check(api_.streamCreate(&s, cuda::kCuStreamNonBlocking), "cuStreamCreate");
  return reinterpret_cast<cudaStream_t>(s);
}

void DeviceRuntime::destroyStream(cudaStream_t stream) const {
  if (stream)
    check(api_.streamDestroy(reinterpret_cast<cuda::CuStream>(stream)), "cuStreamDestroy");
}

void DeviceRuntime::synchronize(cudaStream_t stream) const {
  check(api_.streamSynchronize(reinterpret_cast<cuda::CuStream>(stream)), "cuStreamSynchronize");
}

DeviceRuntime::Event DeviceRuntime::createEvent() const {
  Event e = nullptr;
  check(api_.eventCreate(&e, cuda::kCuEventDefault), "cuEventCreate");
  return e;
}

void DeviceRuntime::destroyEvent(Event event) const {
  if (event) check(api_.eventDestroy(event), "cuEventDestroy_v2");
}

void DeviceRuntime::record(Event event, cudaStream_t stream) const {
  check(api_.eventRecord(event, reinterpret_cast<cuda::CuStream>(stream)), "cuEventRecord");
}

double DeviceRuntime::elapsedMs(Event start, Event end) const {
  check(api_.eventSynchronize(end), "cuEventSynchronize");
  float ms = 0;
  check(api_.eventElapsedTime(&ms, start, end), "cuEventElapsedTime");
  return ms;
}

int localRankFromEnv(int fallback) {
  for (const char* name : {"WEFT_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    if (*end == '\0' && r >= 0 && r < (1L << 20)) return static_cast<int>(r);
  }
  return fallback;
}

}  // namespace weft::perf
