// A CUDA driver library for host tests of calls on device memory, loaded by the library through
// WEFT_CUDA_DRIVER like libcuda.so.1. One "GPU" whose memory is host memory the fake hands out
// (weftFakeDeviceAlloc: the pointer attributes call it device memory), and streams that run
// their operations in order on a thread each, as a GPU runs a stream: copies, host functions,
// 32-bit waits and writes on pinned memory, and test "kernels" (weftFakeLaunch). A stream can
// capture its operations into a graph and the graph be launched again, as CUDA graphs are.
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
#include <thread>
#include <vector>

namespace {

using CuResult = int;
using CuDevicePtr = unsigned long long;
using HostFn = void (*)(void*);
using Op = std::function<void()>;

constexpr CuResult kSuccess = 0;
constexpr CuResult kInvalidValue = 1;
constexpr CuResult kNotPermitted = 800;  // CUDA_ERROR_NOT_PERMITTED
constexpr int kAttrMemoryType = 2, kAttrIsManaged = 8, kAttrDeviceOrdinal = 9;
constexpr unsigned kMemoryTypeDevice = 2;

struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Op> ops;
  bool busy = false;
  bool stop = false;
  bool capturing = false;
  std::vector<Op> captured;
  std::thread worker;

  Stream() : worker([this] { loop(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || !ops.empty(); });
      if (ops.empty()) return;
      Op op = std::move(ops.front());
      ops.pop_front();
      busy = true;
      lock.unlock();
      op();
      lock.lock();
      busy = false;
      cv.notify_all();
    }
  }
  CuResult push(Op op) {
    std::lock_guard<std::mutex> lock(mu);
    if (capturing)
      captured.push_back(std::move(op));
    else
      ops.push_back(std::move(op));
    cv.notify_all();
    return kSuccess;
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ops.empty() && !busy; });
  }
};

struct Graph {
  std::vector<Op> ops;
};

struct Driver {
  std::mutex mu;
  std::map<uintptr_t, size_t> device;  // base -> bytes
  std::unique_ptr<Stream> legacy = std::make_unique<Stream>();
};

Driver& driver() {
  static Driver* d = new Driver;  // never destroyed: streams may run while the process exits
  return *d;
}

Stream* streamOf(void* handle) {
  return handle ? static_cast<Stream*>(handle) : driver().legacy.get();
}

bool isDevice(CuDevicePtr p) {
  Driver& d = driver();
  std::lock_guard<std::mutex> lock(d.mu);
  auto it = d.device.upper_bound(static_cast<uintptr_t>(p));
  if (it == d.device.begin()) return false;
  --it;
  return p < it->first + it->second;
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
FAKE_EXPORT CuResult cuDeviceGetCount(int* n) {
  *n = 1;
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
    case kAttrDeviceOrdinal:
      *static_cast<int*>(data) = 0;
      return kSuccess;
  }
  return kInvalidValue;
}
FAKE_EXPORT CuResult cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *p ? kSuccess : 2;
}
FAKE_EXPORT CuResult cuMemFreeHost(void* p) {
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
  return streamOf(stream)->push([=] { waitEq(word, value); });
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

// The test's side: what cudaMalloc, cudaStreamCreate, kernels and graphs are in a real program.
FAKE_EXPORT void* weftFakeDeviceAlloc(size_t bytes) {
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  Driver& d = driver();
  std::lock_guard<std::mutex> lock(d.mu);
  d.device[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}
FAKE_EXPORT void weftFakeDeviceFree(void* p) {
  Driver& d = driver();
  {
    std::lock_guard<std::mutex> lock(d.mu);
    d.device.erase(reinterpret_cast<uintptr_t>(p));
  }
  std::free(p);
}
FAKE_EXPORT void* weftFakeStreamCreate() { return new Stream; }
FAKE_EXPORT void weftFakeStreamDestroy(void* s) { delete static_cast<Stream*>(s); }
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

}  // extern "C"
