// GPU check of CUDA IPC between two processes, without GoogleTest: ncclMemAlloc's device branch
// (cuMem with a POSIX fd handle) exported and mapped in a forked child by pidfd_getfd and by the
// owner's fd socket, cudaMalloc memory by legacy IPC, and a registered sub-range of each; the
// child checks the owner's bytes and writes its own, and the owner checks those. The child is
// forked before the owner touches CUDA (a CUDA context does not survive fork), and the two talk
// over pipes with timeouts. Exit status 0: pass, 1: a failure, 77: no GPU (skip).
#include <cuda_runtime.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "src/cuda/driver_api.h"
#include "src/cuda/memory.h"
#include "src/cuda/memory_kind.h"
#include "transports/cuda/allocation.h"
#include "transports/cuda/ipc.h"

namespace {

using namespace weft::transport::cuda;

constexpr int kPipeWaitMs = 60000;
constexpr size_t kBytes = 3u << 20;  // over one 2 MiB granule: the rounding is exercised

// What the owner sends per buffer: the descriptor, and the pattern seed to check.
struct Message {
  IpcDescriptorBytes descriptor;
  uint32_t seed;
  uint32_t route;  // FdRoute
};

bool readFully(int fd, void* out, size_t n) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, kPipeWaitMs) <= 0) return false;
    const ssize_t got = read(fd, p, n);
    if (got <= 0) return false;
    p += got, n -= static_cast<size_t>(got);
  }
  return true;
}

bool writeFully(int fd, const void* in, size_t n) {
  return write(fd, in, n) == static_cast<ssize_t>(n);
}

unsigned char pattern(uint32_t seed, size_t i) {
  return static_cast<unsigned char>((i * 131 + seed) ^ (i >> 9));
}

std::vector<unsigned char> fill(uint32_t seed, size_t n) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern(seed, i);
  return v;
}

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      std::printf("FAIL %s:%d %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                  \
      std::printf("\n");                                         \
      return false;                                              \
    }                                                            \
  } while (0)

// The child: maps each buffer it is sent, checks the owner's pattern, writes seed + 1, then
// closes its mappings and acknowledges each buffer.
bool runPeer(int in, int out) {
  const auto& load = weft::cuda::driver();
  CHECK(load.api, "%s", load.why.c_str());
  std::vector<std::unique_ptr<IpcImporter>> importers;
  uint32_t count = 0;
  if (!readFully(in, &count, sizeof count)) return true;  // the owner found no GPU
  CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice in the child");
  for (uint32_t k = 0; k < count; ++k) {
    Message m{};
    CHECK(readFully(in, &m, sizeof m), "no descriptor %u", k);
    IpcDescriptor d;
    std::string why;
    CHECK(parseIpcDescriptor(m.descriptor, &d, &why), "%s", why.c_str());
    IpcImporter::Options options;
    options.route = static_cast<FdRoute>(m.route);
    importers.push_back(std::make_unique<IpcImporter>(*load.api, 0, options));
    void* mapped = nullptr;
    CHECK(importers.back()->map(d, &mapped, &why) == weft::Status::kSuccess, "buffer %u: %s", k,
          why.c_str());
    std::vector<unsigned char> got(d.length);
    CHECK(cudaMemcpy(got.data(), mapped, d.length, cudaMemcpyDeviceToHost) == cudaSuccess,
          "reading buffer %u", k);
    CHECK(got == fill(m.seed, d.length), "buffer %u: the owner's bytes differ", k);
    const std::vector<unsigned char> mine = fill(m.seed + 1, d.length);
    CHECK(cudaMemcpy(mapped, mine.data(), d.length, cudaMemcpyHostToDevice) == cudaSuccess,
          "writing buffer %u", k);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync");
    std::printf("child: buffer %u (%s, %zu bytes at offset %llu) mapped, checked, written%s\n", k,
                d.kind == 1 ? "cuMem fd" : "legacy IPC", static_cast<size_t>(d.length),
                static_cast<unsigned long long>(d.offset),
                importers.back()->fdsFromSocket() ? " (fd by socket)" : "");
  }
  for (auto& i : importers) i->close();
  const char ack = 'y';
  CHECK(writeFully(out, &ack, 1), "ack");
  return true;
}

struct Buffer {
  void* ptr;
  size_t bytes;
  uint32_t seed;
  FdRoute route;
  bool registered;  // through ncclCommRegister's device branch, else exported directly
};

// Sends each buffer's descriptor, waits for the child, then checks the child's writes.
bool runOwner(int toPeer, int fromPeer) {
  const auto& load = weft::cuda::driver();
  CHECK(load.api, "%s", load.why.c_str());
  const weft::cuda::DriverApi* api = load.api.get();
  // Before any CUDA call: no context, so ncclMemAlloc's rule gives host memory.
  void* host = weft::cuda::memAlloc(api, 4096);
  CHECK(weft::cuda::classifyPointer(api, host).kind == weft::cuda::MemoryKind::kHost,
        "memAlloc without a context was not host memory");
  weft::cuda::memFree(api, host);

  CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
  CHECK(cudaFree(nullptr) == cudaSuccess, "context");
  void* cuMemWhole = weft::cuda::memAlloc(api, kBytes);
  void* cuMemForRegister = weft::cuda::memAlloc(api, kBytes);
  DeviceAllocation a;
  CHECK(findDeviceAllocation(cuMemWhole, &a), "memAlloc with a context made no device allocation");
  std::printf("owner: ncclMemAlloc %zu bytes -> %s allocation of %zu bytes, fd %d\n", kBytes,
              a.cuMem ? "cuMem" : "cuMemAlloc", a.bytes, a.fd);
  CHECK(a.cuMem && a.fd >= 0, "this GPU should support cuMem with POSIX fd handles");
  CHECK(a.bytes % (2u << 20) == 0 && a.bytes >= kBytes, "allocation not granularity-rounded");
  CHECK(weft::cuda::classifyPointer(api, cuMemWhole).kind == weft::cuda::MemoryKind::kDevice,
        "memAlloc memory is not device memory");
  void* legacyWhole = nullptr;
  void* legacyForRegister = nullptr;
  CHECK(cudaMalloc(&legacyWhole, kBytes) == cudaSuccess, "cudaMalloc");
  CHECK(cudaMalloc(&legacyForRegister, kBytes) == cudaSuccess, "cudaMalloc");

  const size_t off = 3 * 4096 + 64;
  const std::vector<Buffer> buffers = {
      {cuMemWhole, kBytes, 10, FdRoute::kAny, false},
      {legacyWhole, kBytes, 20, FdRoute::kAny, false},
      {static_cast<char*>(cuMemForRegister) + off, 1 << 20, 30, FdRoute::kSocketOnly, true},
      {static_cast<char*>(legacyForRegister) + off, 1 << 20, 40, FdRoute::kAny, true},
  };
  const int comm = 0;  // stands for the communicator ncclCommRegister keys by
  const uint32_t count = static_cast<uint32_t>(buffers.size());
  CHECK(writeFully(toPeer, &count, sizeof count), "count");
  for (const Buffer& b : buffers) {
    const std::vector<unsigned char> v = fill(b.seed, b.bytes);
    CHECK(cudaMemcpy(b.ptr, v.data(), b.bytes, cudaMemcpyHostToDevice) == cudaSuccess, "fill");
    IpcDescriptor d;
    std::string why;
    if (b.registered) {
      CHECK(weft::cuda::registerDeviceBuffer(&comm, api, b.ptr, b.bytes),
            "registration took the host path");
      weft::cuda::DeviceRegistration reg;
      CHECK(weft::cuda::findDeviceRegistration(&comm, b.ptr, b.bytes, &reg), "registration lost");
      d = reg.descriptor;
      CHECK(d.offset == off, "registered offset %llu", static_cast<unsigned long long>(d.offset));
    } else {
      CHECK(exportDeviceBuffer(*api, b.ptr, b.bytes, &d, &why) == weft::Status::kSuccess, "%s",
            why.c_str());
    }
    Message m{};
    m.descriptor = encodeIpcDescriptor(d);
    m.seed = b.seed;
    m.route = static_cast<uint32_t>(b.route);
    CHECK(writeFully(toPeer, &m, sizeof m), "descriptor");
  }
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync");
  char ack = 0;
  CHECK(readFully(fromPeer, &ack, 1) && ack == 'y', "the child did not finish");
  for (const Buffer& b : buffers) {
    std::vector<unsigned char> got(b.bytes);
    CHECK(cudaMemcpy(got.data(), b.ptr, b.bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "read");
    CHECK(got == fill(b.seed + 1, b.bytes), "seed %u: the child's bytes did not arrive", b.seed);
  }
  std::printf("owner: the child's writes arrived in all %u buffers\n", count);
  CHECK(weft::cuda::deregisterDeviceBuffer(&comm, buffers[2].ptr), "deregister");
  CHECK(weft::cuda::deregisterDeviceBuffer(&comm, buffers[3].ptr), "deregister");
  weft::cuda::memFree(api, cuMemWhole);
  weft::cuda::memFree(api, cuMemForRegister);
  CHECK(deviceAllocationCount() == 0, "allocations left after memFree");
  cudaFree(legacyWhole);
  cudaFree(legacyForRegister);
  return true;
}

}  // namespace

int main() {
  // No CUDA call before the fork: the driver table is loaded without cuInit.
  const auto& load = weft::cuda::driver();
  if (!load.api) {
    std::printf("SKIP: %s\n", load.why.c_str());
    return 77;
  }
  int toPeer[2], fromPeer[2];
  if (pipe2(toPeer, O_CLOEXEC) != 0 || pipe2(fromPeer, O_CLOEXEC) != 0) return 1;
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    close(toPeer[1]);
    close(fromPeer[0]);
    _exit(runPeer(toPeer[0], fromPeer[1]) ? 0 : 1);
  }
  close(toPeer[0]);
  close(fromPeer[1]);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    close(toPeer[1]);  // the child sees the pipe close and ends
    waitpid(child, nullptr, 0);
    return 77;
  }
  const bool ok = runOwner(toPeer[1], fromPeer[0]);
  close(toPeer[1]);
  int status = 0;
  waitpid(child, &status, 0);
  const bool childOk = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::printf("%s (owner %s, child %s)\n", ok && childOk ? "PASS" : "FAIL", ok ? "ok" : "failed",
              childOk ? "ok" : "failed");
  return ok && childOk ? 0 : 1;
}
