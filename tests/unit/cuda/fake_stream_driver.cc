// A CUDA driver library for host tests of calls on device memory, loaded by the library through
// WEFT_CUDA_DRIVER like libcuda.so.1. One "GPU" whose memory is host memory the fake hands out
// (weftFakeDeviceAlloc: the pointer attributes call it device memory), and streams that run
// their operations in order on a thread each, as a GPU runs a stream: copies, host functions,
// 32-bit waits and writes on pinned memory, and test "kernels" (weftFakeLaunch). A stream can
// capture its operations into a graph and the graph be launched again, as CUDA graphs are.
// What a program using the driver API itself needs (the perf tools) is there too: a primary
// context, cuMemAlloc'd device memory, synchronous copies, streams it creates, and events whose
// elapsed time comes from a steady clock read when the stream reaches them.
// Kernels from an image: any image loads, and it has the library's two kernels: the device
// interpreter (weftInterpret, src/cuda/interp_launch.h) and the direct collectives (weftDirect,
// src/cuda/direct_launch.h), each run by its host build with one host thread per block, all of a
// launch's blocks at once (they wait for each other).
//
// Like a GPU, it synchronises the device where the real driver does: cuMemAlloc, cuMemFree,
// cuMemHostAlloc, cuMemAllocHost and cuMemFreeHost wait for every running kernel of the current
// GPU to finish (bounded by WEFT_FAKE_SYNC_LIMIT_MS, default 20000: past it the call fails and
// counts a deadlock), and count the calls that found kernels running (weftFakeSyncHazards). Its
// scheduler can withhold co-residency as a GPU does, each mode chosen by the environment when an
// operation is queued:
//   WEFT_FAKE_LEGACY_SYNC=1  the legacy NULL stream: an operation queued on it waits for all work
//                            queued before on blocking streams (cuStreamCreate without
//                            CU_STREAM_NON_BLOCKING), and one queued on a blocking stream waits
//                            for the legacy stream's work queued before;
//   WEFT_FAKE_ONE_QUEUE=1    CUDA_DEVICE_MAX_CONNECTIONS=1: every stream feeds one queue in the
//                            order operations were queued, and none starts before every earlier
//                            one has started (so an operation waiting behind a running kernel on
//                            its stream holds back everything queued after it);
//   WEFT_FAKE_NO_MPS=<file>  separate processes without MPS: kernels of different processes never
//                            run at once (a process holds an exclusive lock on the file while
//                            any of its kernels runs).
// Two kernels on one stream run one after the other, as on a GPU.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "src/cuda/direct_kernels.h"
#include "src/cuda/direct_launch.h"
#include "src/cuda/interp_launch.h"
#include "tests/unit/cuda/fake_device_memory.h"
#include "tests/unit/cuda/fake_stream.h"

namespace {

using namespace weft::fake::stream;  // NOLINT: the driver's own parts

using CuDevicePtr = unsigned long long;
using HostFn = void (*)(void*);

constexpr CuResult kInvalidValue = 1;
constexpr CuResult kNotPermitted = 800;  // CUDA_ERROR_NOT_PERMITTED
constexpr CuResult kOutOfMemory = 2;
constexpr CuResult kInvalidHandle = 400;
constexpr CuResult kNotFound = 500;
constexpr CuResult kNotReady = 600;
constexpr CuResult kUnknown = 999;  // CUDA_ERROR_UNKNOWN: a wait that ran past its limit
// A stream or event wait gives up after this long (a hung test fails instead of hanging).
constexpr std::chrono::seconds kWaitLimit{300};
constexpr int kAttrMemoryType = 2, kAttrBufferId = 7, kAttrIsManaged = 8, kAttrDeviceOrdinal = 9;
constexpr unsigned kMemoryTypeDevice = 2;

// The kernels every module has: their CUfunction handles.
int interpFunction;
int directFunction;

bool isDevice(CuDevicePtr p) {
  weft::fake::Allocation a;
  return weft::fake::findDevice(static_cast<uintptr_t>(p), &a);
}

// Runs every block of an interpreter launch at once, one host thread each, and returns when all
// have ended (each of the interpreter's waits has its own time limit).
void runInterpreter(const weft::cuda::InterpLaunch& p, unsigned blocks) {
  std::vector<std::thread> threads;
  threads.reserve(blocks);
  for (unsigned b = 0; b < blocks; ++b)
    threads.emplace_back([&p, b] {
      weft::cuda::LaneShared shared{};
      const uint32_t rank = weft::cuda::launchRankOf(p, b);
      weft::cuda::runLane(p.args[rank], b - p.firstBlock[rank], 0, 1, shared);
    });
  for (std::thread& t : threads) t.join();
}

// The same for a direct launch: every block of every rank at once.
void runDirect(const weft::cuda::DirectLaunch& p, unsigned blocks) {
  std::vector<std::thread> threads;
  threads.reserve(blocks);
  for (unsigned b = 0; b < blocks; ++b)
    threads.emplace_back([&p, b] {
      weft::cuda::DirectShared shared{};
      weft::cuda::runDirectBlock(p, b, 0, 1, shared);
    });
  for (std::thread& t : threads) t.join();
}

void waitEq(volatile uint32_t* word, uint32_t value) {
  while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != value)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
}

}  // namespace

// Exported whatever the build's default visibility: the library finds them with dlsym.
#define FAKE_EXPORT __attribute__((visibility("default")))

extern "C" {

// The driver's entry points.
FAKE_EXPORT CuResult cuInit(unsigned) { return kSuccess; }
FAKE_EXPORT CuResult cuDriverGetVersion(int* v) {
  *v = 13000;
  return kSuccess;
}
FAKE_EXPORT CuResult cuPointerGetAttribute(void* data, int attribute, CuDevicePtr ptr) {
  if (!isDevice(ptr)) return kInvalidValue;
  switch (attribute) {
    case kAttrMemoryType:
      *static_cast<unsigned*>(data) = kMemoryTypeDevice;
      return kSuccess;
    case kAttrIsManaged:
      *static_cast<unsigned*>(data) = 0;
      return kSuccess;
    case kAttrDeviceOrdinal: {
      weft::fake::Allocation a;
      weft::fake::findDevice(static_cast<uintptr_t>(ptr), &a);
      *static_cast<int*>(data) = a.device;
      return kSuccess;
    }
    case kAttrBufferId: {
      weft::fake::Allocation a;
      weft::fake::findDevice(static_cast<uintptr_t>(ptr), &a);
      *static_cast<unsigned long long*>(data) = a.id;
      return kSuccess;
    }
  }
  return kInvalidValue;
}
FAKE_EXPORT CuResult cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  if (!synchroniseDevice("cuMemHostAlloc")) return kUnknown;
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *p ? kSuccess : 2;
}
FAKE_EXPORT CuResult cuMemAllocHost_v2(void** p, size_t bytes) {
  if (!synchroniseDevice("cuMemAllocHost")) return kUnknown;
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *p ? kSuccess : 2;
}
FAKE_EXPORT CuResult cuMemFreeHost(void* p) {
  if (!synchroniseDevice("cuMemFreeHost")) return kUnknown;
  std::free(p);
  return kSuccess;
}
FAKE_EXPORT CuResult cuMemHostGetDevicePointer_v2(CuDevicePtr* d, void* p, unsigned) {
  *d = reinterpret_cast<uintptr_t>(p);
  return kSuccess;
}
FAKE_EXPORT CuResult cuMemcpyDtoHAsync_v2(void* dst, CuDevicePtr src, size_t bytes, void* stream) {
  if (!isDevice(src)) return kInvalidValue;
  return streamOf(stream)->push(
      [=] { std::memcpy(dst, reinterpret_cast<const void*>(src), bytes); });
}
FAKE_EXPORT CuResult cuMemcpyHtoDAsync_v2(CuDevicePtr dst, const void* src, size_t bytes,
                                          void* stream) {
  if (!isDevice(dst)) return kInvalidValue;
  return streamOf(stream)->push([=] { std::memcpy(reinterpret_cast<void*>(dst), src, bytes); });
}
FAKE_EXPORT CuResult cuLaunchHostFunc(void* stream, HostFn fn, void* data) {
  return streamOf(stream)->push([=] { fn(data); });
}
FAKE_EXPORT CuResult cuStreamWaitValue32_v2(void* stream, CuDevicePtr addr, uint32_t value,
                                            unsigned flags) {
  if (flags != 1) return kNotPermitted;  // only CU_STREAM_WAIT_VALUE_EQ is modelled
  auto* word = reinterpret_cast<volatile uint32_t*>(addr);
  return streamOf(stream)->push([=] { waitEq(word, value); }, true);
}
FAKE_EXPORT CuResult cuStreamWriteValue32_v2(void* stream, CuDevicePtr addr, uint32_t value,
                                             unsigned) {
  auto* word = reinterpret_cast<uint32_t*>(addr);
  return streamOf(stream)->push([=] { __atomic_store_n(word, value, __ATOMIC_RELEASE); });
}
FAKE_EXPORT CuResult cuStreamIsCapturing(void* stream, int* status) {
  Stream* s = streamOf(stream);
  std::lock_guard<std::mutex> lock(s->mu);
  *status = s->capturing ? 1 : 0;
  return kSuccess;
}

// A program's own device memory, copies, streams and events (the perf tools).
FAKE_EXPORT void* weftFakeDeviceAlloc(size_t bytes);
FAKE_EXPORT void weftFakeDeviceFree(void* p);
FAKE_EXPORT CuResult cuMemAlloc_v2(CuDevicePtr* ptr, size_t bytes) {
  if (bytes == 0) return kInvalidValue;
  if (!synchroniseDevice("cuMemAlloc")) return kUnknown;
  void* p = weftFakeDeviceAlloc(bytes);
  if (!p) return kOutOfMemory;
  *ptr = reinterpret_cast<uintptr_t>(p);
  return kSuccess;
}
FAKE_EXPORT CuResult cuMemFree_v2(CuDevicePtr ptr) {
  if (!isDevice(ptr)) return kInvalidValue;
  if (!synchroniseDevice("cuMemFree")) return kUnknown;
  weftFakeDeviceFree(reinterpret_cast<void*>(ptr));
  return kSuccess;
}
// Synchronous copies run after the legacy stream's work, as cuMemcpy does.
FAKE_EXPORT CuResult cuMemcpyHtoD_v2(CuDevicePtr dst, const void* src, size_t bytes) {
  if (bytes == 0) return kSuccess;
  if (!isDevice(dst) || !isDevice(dst + bytes - 1)) return kInvalidValue;
  Stream* legacy = streamOf(nullptr);
  legacy->push([=] { std::memcpy(reinterpret_cast<void*>(dst), src, bytes); });
  return legacy->synchronizeFor(kWaitLimit) ? kSuccess : kUnknown;
}
FAKE_EXPORT CuResult cuMemcpyDtoH_v2(void* dst, CuDevicePtr src, size_t bytes) {
  if (bytes == 0) return kSuccess;
  if (!isDevice(src) || !isDevice(src + bytes - 1)) return kInvalidValue;
  Stream* legacy = streamOf(nullptr);
  legacy->push([=] { std::memcpy(dst, reinterpret_cast<const void*>(src), bytes); });
  return legacy->synchronizeFor(kWaitLimit) ? kSuccess : kUnknown;
}
FAKE_EXPORT CuResult cuStreamCreate(void** stream, unsigned flags) {
  *stream = makeStream((flags & 1u) == 0);  // without CU_STREAM_NON_BLOCKING: blocking
  return kSuccess;
}
FAKE_EXPORT CuResult cuStreamDestroy_v2(void* stream) {
  if (!stream || isLegacy(stream)) return kInvalidValue;
  destroyStream(static_cast<Stream*>(stream));
  return kSuccess;
}
FAKE_EXPORT CuResult cuStreamSynchronize(void* stream) {
  return streamOf(stream)->synchronizeFor(kWaitLimit) ? kSuccess : kUnknown;
}
FAKE_EXPORT CuResult cuEventCreate(void** event, unsigned) {
  *event = new Event;
  return kSuccess;
}
FAKE_EXPORT CuResult cuEventDestroy_v2(void* event) {
  auto* e = static_cast<Event*>(event);
  {
    std::lock_guard<std::mutex> lock(e->mu);
    if (e->uses > 0) {
      e->destroyed = true;  // the last operation using it deletes it
      return kSuccess;
    }
  }
  delete e;
  return kSuccess;
}
FAKE_EXPORT CuResult cuEventRecord(void* event, void* stream) {
  auto* e = static_cast<Event*>(event);
  {
    std::lock_guard<std::mutex> lock(e->mu);
    e->reached = false;
    ++e->uses;
  }
  return streamOf(stream)->push([e] {
    useEvent(e, [e](std::unique_lock<std::mutex>&) {
      e->at = std::chrono::steady_clock::now();
      e->reached = true;
      e->cv.notify_all();
    });
  });
}
FAKE_EXPORT CuResult cuEventQuery(void* event) {
  auto* e = static_cast<Event*>(event);
  std::lock_guard<std::mutex> lock(e->mu);
  return e->reached ? kSuccess : kNotReady;
}
FAKE_EXPORT CuResult cuStreamQuery(void* stream) {
  Stream* s = streamOf(stream);
  std::lock_guard<std::mutex> lock(s->mu);
  return s->ops.empty() && !s->busy ? kSuccess : kNotReady;
}
// The stream waits until the event's last record was reached (as recorded when this is called).
FAKE_EXPORT CuResult cuStreamWaitEvent(void* stream, void* event, unsigned) {
  auto* e = static_cast<Event*>(event);
  {
    std::lock_guard<std::mutex> lock(e->mu);
    ++e->uses;
  }
  const auto wait = [e] {
    useEvent(e, [e](std::unique_lock<std::mutex>& lock) {
      e->cv.wait_for(lock, kWaitLimit, [&] { return e->reached; });
    });
  };
  return streamOf(stream)->push(wait, true);
}
FAKE_EXPORT CuResult cuEventSynchronize(void* event) {
  auto* e = static_cast<Event*>(event);
  std::unique_lock<std::mutex> lock(e->mu);
  return e->cv.wait_for(lock, kWaitLimit, [&] { return e->reached; }) ? kSuccess : kUnknown;
}
FAKE_EXPORT CuResult cuEventElapsedTime_v2(float* ms, void* start, void* end) {
  auto* a = static_cast<Event*>(start);
  auto* b = static_cast<Event*>(end);
  if (a == b) {
    std::lock_guard<std::mutex> lock(a->mu);
    if (!a->reached) return kNotReady;
    *ms = 0;
    return kSuccess;
  }
  std::scoped_lock lock(a->mu, b->mu);
  if (!a->reached || !b->reached) return kNotReady;
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return kSuccess;
}

// Modules, kernels and memsets.
FAKE_EXPORT CuResult cuModuleLoadData(void** module, const void* image) {
  if (!module || !image) return kInvalidValue;
  auto* handle = new int(0);
  Driver& d = driver();
  std::lock_guard<std::mutex> lock(d.mu);
  d.modules.insert(handle);
  *module = handle;
  return kSuccess;
}
FAKE_EXPORT CuResult cuModuleUnload(void* module) {
  Driver& d = driver();
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.modules.erase(module) == 0) return kInvalidHandle;
  delete static_cast<int*>(module);
  return kSuccess;
}
FAKE_EXPORT CuResult cuModuleGetFunction(void** function, void* module, const char* name) {
  if (!function || !name) return kInvalidValue;
  {
    Driver& d = driver();
    std::lock_guard<std::mutex> lock(d.mu);
    if (!d.modules.count(module)) return kInvalidHandle;
  }
  if (std::strcmp(name, weft::cuda::kInterpKernelName) == 0) {
    *function = &interpFunction;
    return kSuccess;
  }
  if (std::strcmp(name, weft::cuda::kDirectKernelName) == 0) {
    *function = &directFunction;
    return kSuccess;
  }
  return kNotFound;
}
// The parameters are copied now, as the driver does: the caller's may go once this returns.
FAKE_EXPORT CuResult cuLaunchKernel(void* function, unsigned gridX, unsigned gridY, unsigned gridZ,
                                    unsigned blockX, unsigned blockY, unsigned blockZ,
                                    unsigned sharedBytes, void* stream, void** params,
                                    void** extra) {
  if (function != &interpFunction && function != &directFunction) return kInvalidHandle;
  if (!params || !params[0] || extra) return kInvalidValue;
  if (function == &directFunction) {
    if (gridX == 0 || gridY != 1 || gridZ != 1 || blockX == 0 ||
        blockX > weft::cuda::kDirectThreads || blockY != 1 || blockZ != 1)
      return kInvalidValue;
    weft::cuda::DirectLaunch p;
    std::memcpy(&p, params[0], sizeof p);
    if (!weft::cuda::directLaunchValid(p) || p.ranks * p.blocks != gridX) return kInvalidValue;
    driver().launches.fetch_add(1);
    driver().directLaunches.fetch_add(1);
    return streamOf(stream)->push([p, gridX] { runDirect(p, gridX); });
  }
  if (gridX == 0 || gridY != 1 || gridZ != 1 || blockX == 0 ||
      blockX > weft::cuda::kMaxInterpThreads || blockY != 1 || blockZ != 1)
    return kInvalidValue;
  weft::cuda::InterpLaunch p;
  std::memcpy(&p, params[0], sizeof p);
  if (p.ranks == 0 || p.ranks > weft::cuda::kMaxLaunchRanks || p.firstBlock[p.ranks] != gridX)
    return kInvalidValue;
  driver().launches.fetch_add(1);
  const int device = weft::fake::currentDevice();
  return streamOf(stream)->push([p, gridX, device] {
    kernelBegins(device);
    runInterpreter(p, gridX);
    kernelEnds(device);
  });
}
FAKE_EXPORT CuResult cuMemsetD8Async(CuDevicePtr dst, unsigned char value, size_t count,
                                     void* stream) {
  if (count == 0) return kSuccess;
  if (!isDevice(dst) || !isDevice(dst + count - 1)) return kInvalidValue;
  return streamOf(stream)->push([=] { std::memset(reinterpret_cast<void*>(dst), value, count); });
}
// Synchronous, after the legacy stream's work, as cuMemsetD8 is.
FAKE_EXPORT CuResult cuMemsetD8_v2(CuDevicePtr dst, unsigned char value, size_t count) {
  const CuResult rc = cuMemsetD8Async(dst, value, count, nullptr);
  if (rc != kSuccess) return rc;
  return streamOf(nullptr)->synchronizeFor(kWaitLimit) ? kSuccess : kUnknown;
}

// The test's side: what cudaMalloc, cudaStreamCreate, kernels and graphs are in a real program.
FAKE_EXPORT void* weftFakeDeviceAlloc(size_t bytes) { return weft::fake::allocateDevice(bytes); }
FAKE_EXPORT void weftFakeDeviceFree(void* p) { weft::fake::freeDevice(p); }
// The test's streams do not synchronise with the legacy stream (cudaStreamNonBlocking) unless
// made by weftFakeStreamCreateBlocking (cudaStreamCreate's default).
FAKE_EXPORT void* weftFakeStreamCreate() { return makeStream(false); }
FAKE_EXPORT void* weftFakeStreamCreateBlocking() { return makeStream(true); }
FAKE_EXPORT void weftFakeStreamDestroy(void* s) { destroyStream(static_cast<Stream*>(s)); }
FAKE_EXPORT void weftFakeStreamSynchronize(void* s) { streamOf(s)->synchronize(); }
// A "kernel": fn(arg) runs on the stream in order with its other operations.
FAKE_EXPORT void weftFakeLaunch(void* stream, void (*fn)(void*), void* arg) {
  streamOf(stream)->push([=] { fn(arg); });
}
FAKE_EXPORT void weftFakeBeginCapture(void* stream) {
  Stream* s = streamOf(stream);
  std::lock_guard<std::mutex> lock(s->mu);
  s->capturing = true;
  s->captured.clear();
}
FAKE_EXPORT void* weftFakeEndCapture(void* stream) {
  Stream* s = streamOf(stream);
  std::lock_guard<std::mutex> lock(s->mu);
  s->capturing = false;
  return new Graph{std::move(s->captured)};
}
FAKE_EXPORT void weftFakeGraphLaunch(void* graph, void* stream) {
  for (const Op& op : static_cast<Graph*>(graph)->ops) streamOf(stream)->push(op);
}
FAKE_EXPORT void weftFakeGraphDestroy(void* graph) { delete static_cast<Graph*>(graph); }
// How many kernels were queued or captured (cuLaunchKernel calls that succeeded).
FAKE_EXPORT uint64_t weftFakeKernelLaunches() { return driver().launches.load(); }
// Calls that synchronise the device (allocations, frees) made while kernels of its GPU ran, and
// waits the fake gave up as deadlocks.
FAKE_EXPORT uint64_t weftFakeSyncHazards() { return driver().syncHazards.load(); }
FAKE_EXPORT uint64_t weftFakeDeadlocks() { return driver().deadlocks.load(); }
// How many of them were the direct kernel's.
FAKE_EXPORT uint64_t weftFakeDirectLaunches() { return driver().directLaunches.load(); }
// How many modules are loaded.
FAKE_EXPORT size_t weftFakeModulesLoaded() {
  Driver& d = driver();
  std::lock_guard<std::mutex> lock(d.mu);
  return d.modules.size();
}

}  // extern "C"
