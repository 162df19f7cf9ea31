// The GPU side of the perf tools: device buffers, streams and CUDA-event timing, as nccl-tests
// has them, through the CUDA driver table the library itself loads with dlopen
// (src/cuda/driver_api.h). Nothing links against cudart or libcuda, so the tools still start
// where no driver is installed and then run on host memory.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "nccl.h"
#include "src/cuda/driver_api.h"

namespace weft::perf {

class DeviceRuntime {
 public:
  // The driver (WEFT_CUDA_DRIVER, else libcuda.so.1) initialized, with at least one device and
  // every entry point the tools need; null with *why set otherwise ("no CUDA device: ...").
  static std::unique_ptr<DeviceRuntime> open(std::string* why);
  ~DeviceRuntime();
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;

  int deviceCount() const { return count_; }
  int driverVersion() const { return version_; }
  // The ordinal a rank uses, as nccl-tests picks it: NCCL_TESTS_DEVICE (`firstDevice` >= 0),
  // else the process's first slot on this host (localRank * ranks per process), then one
  // device per rank in order, modulo the device count (several ranks may share a GPU).
  int ordinalFor(int firstDevice, int slot) const;
  // Retains the primary context of `ordinal` (from one thread, before the workers start).
  void retain(int ordinal);
  // Makes `ordinal`'s primary context current on the calling thread (cudaSetDevice).
  void use(int ordinal) const;
  // The PCI bus id ("0000:3b:00.0"), or "" when the driver does not say.
  std::string busId(int ordinal) const;
  // The GPU's memory bandwidth in 1e9 bytes per second from its memory clock and bus width
  // (perf/roofline.h, hbmGBps), with *source saying so ("driver: 3201 MHz x 6144 bit"); 0, and
  // *source the reason, when the driver does not say.
  double memoryGBps(int ordinal, std::string* source) const;

  void* alloc(size_t bytes) const;
  void release(void* device) const;
  void toDevice(void* device, const void* host, size_t bytes) const;
  void toHost(void* host, const void* device, size_t bytes) const;
  cudaStream_t createStream() const;
  void destroyStream(cudaStream_t stream) const;
  void synchronize(cudaStream_t stream) const;

  using Event = cuda::CuEvent;
  Event createEvent() const;
  void destroyEvent(Event event) const;
  void record(Event event, cudaStream_t stream) const;
  // Milliseconds from `start` to `end`, waiting for `end` first.
  double elapsedMs(Event start, Event end) const;

 private:
  explicit DeviceRuntime(const cuda::DriverApi& api) : api_(api) {}
  // Ends the process (die) with the call's name and the driver's error text unless rc is 0.
  void check(cuda::CuResult rc, const char* what) const;

  const cuda::DriverApi& api_;
  int count_ = 0;
  int version_ = 0;
  std::map<int, cuda::CuContext> contexts_;  // ordinal -> retained primary context
};

// This process's index among the processes on its host, from the launcher's environment
// (weftrun, torchrun, Open MPI, MPICH, Slurm); `fallback` where none says.
int localRankFromEnv(int fallback);

}  // namespace weft::perf
