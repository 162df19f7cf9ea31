// What tests of calls on device memory use of the fake stream driver (fake_stream_driver.cc)
// directly: its device memory, streams, host-function "kernels", capture and launch counts.
#pragma once
#include <cstddef>
#include <cstdint>

extern "C" {
void* weftFakeDeviceAlloc(size_t bytes);
void weftFakeDeviceFree(void* p);
void* weftFakeStreamCreate();
void* weftFakeStreamCreateBlocking();  // synchronises with the legacy stream
void weftFakeStreamDestroy(void* s);
void weftFakeStreamSynchronize(void* s);
void weftFakeLaunch(void* stream, void (*fn)(void*), void* arg);
void weftFakeBeginCapture(void* stream);
void* weftFakeEndCapture(void* stream);
void weftFakeGraphLaunch(void* graph, void* stream);
void weftFakeGraphDestroy(void* graph);
// Launches of the device interpreter's kernel (cuLaunchKernel) so far.
uint64_t weftFakeKernelLaunches();
// Allocations and frees that found kernels of their GPU running (each synchronises the device),
// and waits the fake gave up as deadlocks.
uint64_t weftFakeSyncHazards();
uint64_t weftFakeDeadlocks();
// Of them, launches of the direct kernel (weftDirect).
uint64_t weftFakeDirectLaunches();
}

namespace weft::test {

// Whether the library under test has the interpreter's kernel image (built with nvcc): only then
// do calls on device memory take the kernel path.
inline constexpr bool kKernelImage = WEFT_KERNEL_IMAGE != 0;

// `count` elements of T in the fake's device memory (plus one spare).
template <class T>
struct FakeDeviceBuffer {
  T* p = nullptr;
  size_t count = 0;
  explicit FakeDeviceBuffer(size_t n)
      : p(static_cast<T*>(weftFakeDeviceAlloc((n + 1) * sizeof(T)))), count(n) {}
  ~FakeDeviceBuffer() { weftFakeDeviceFree(p); }
  FakeDeviceBuffer(const FakeDeviceBuffer&) = delete;
  FakeDeviceBuffer& operator=(const FakeDeviceBuffer&) = delete;
};

}  // namespace weft::test
