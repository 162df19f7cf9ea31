// GPU check of calls on device memory through the public API (libnccl.so.2), without
// GoogleTest: 1-4 ranks as communicators of this process on the one GPU (ncclCommInitAll), each
// on its own stream and all on one stream; allreduce, allgather, reducescatter, broadcast,
// alltoall and send/recv on cudaMalloc'd buffers checked against values computed here; a kernel
// queued before and one after a call on the same stream; a call captured into a CUDA graph and
// the graph launched three times with new inputs. Exit status 0: pass, 1: a failure, 77: no GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "nccl.h"

namespace {

int gFailures = 0;

#define CHECK(cond, ...)        \
  do {                          \
    if (!(cond)) {              \
      std::printf("FAIL: ");    \
      std::printf(__VA_ARGS__); \
      std::printf("\n");        \
      ++gFailures;              \
      return;                   \
    }                           \
  } while (0)
#define CHECK_CUDA(call) \
  CHECK((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))
#define CHECK_NCCL(call) CHECK((call) == ncclSuccess, "%s: %s", #call, ncclGetLastError(nullptr))

float valueOf(int rank, size_t i) { return float(rank + 1) + float(i % 7); }

__global__ void fillKernel(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = v;
}
__global__ void doubleKernel(const float* in, float* out, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = 2 * in[i];
}

struct Ranks {
  int n;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<float*> send, recv;
  size_t count;
  Ranks(int n, size_t count, bool oneStream)
      : n(n), comms(n), streams(n), send(n), recv(n), count(count) {
    ncclCommInitAll(comms.data(), n, nullptr);
    for (int r = 0; r < n; ++r) {
      if (r == 0 || !oneStream)
        cudaStreamCreate(&streams[r]);
      else
        streams[r] = streams[0];
      cudaMalloc(&send[r], count * n * sizeof(float));
      cudaMalloc(&recv[r], count * n * sizeof(float));
    }
  }
  ~Ranks() {
    cudaDeviceSynchronize();
    for (int r = 0; r < n; ++r) {
      ncclCommDestroy(comms[r]);
      cudaFree(send[r]);
      cudaFree(recv[r]);
      if (r == 0 || streams[r] != streams[0]) cudaStreamDestroy(streams[r]);
    }
  }
  void fill() {
    std::vector<float> h(count * n), minus(count * n, -1.f);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < h.size(); ++i) h[i] = valueOf(r, i);
      cudaMemcpy(send[r], h.data(), h.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(recv[r], minus.data(), minus.size() * 4, cudaMemcpyHostToDevice);
    }
  }
  std::vector<float> out(int r) {
    std::vector<float> h(count * n);
    cudaMemcpy(h.data(), recv[r], h.size() * 4, cudaMemcpyDeviceToHost);
    return h;
  }
};

void everyCollective(int n, bool oneStream) {
  Ranks k(n, 100003, oneStream);
  const size_t c = k.count;
  float sum0 = 0;
  for (int r = 0; r < n; ++r) sum0 += float(r + 1);
  auto group = [&](auto&& call) {
    ncclGroupStart();
    for (int r = 0; r < n; ++r) call(r);
    return ncclGroupEnd();
  };
  k.fill();
  CHECK_NCCL(group([&](int r) {
    ncclAllReduce(k.send[r], k.recv[r], c, ncclFloat, ncclSum, k.comms[r], k.streams[r]);
  }));
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < n; ++r) {
    auto h = k.out(r);
    for (size_t i = 0; i < c; i += 101)
      CHECK(h[i] == sum0 + n * float(i % 7), "allreduce n=%d rank %d [%zu] = %f", n, r, i, h[i]);
  }
  k.fill();
  CHECK_NCCL(group(
      [&](int r) { ncclAllGather(k.send[r], k.recv[r], c, ncclFloat, k.comms[r], k.streams[r]); }));
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < n; ++r) {
    auto h = k.out(r);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < c; i += 101)
        CHECK(h[q * c + i] == valueOf(q, i), "allgather n=%d rank %d", n, r);
  }
  k.fill();
  CHECK_NCCL(group([&](int r) {
    ncclReduceScatter(k.send[r], k.recv[r], c, ncclFloat, ncclSum, k.comms[r], k.streams[r]);
  }));
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < n; ++r) {
    auto h = k.out(r);
    for (size_t i = 0; i < c; i += 101)
      CHECK(h[i] == sum0 + n * float((r * c + i) % 7), "reducescatter n=%d rank %d", n, r);
  }
  k.fill();
  CHECK_NCCL(group([&](int r) {
    ncclBroadcast(k.send[r], k.recv[r], c, ncclFloat, n - 1, k.comms[r], k.streams[r]);
  }));
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < n; ++r) {
    auto h = k.out(r);
    for (size_t i = 0; i < c; i += 101)
      CHECK(h[i] == valueOf(n - 1, i), "broadcast n=%d rank %d", n, r);
  }
  k.fill();
  CHECK_NCCL(group(
      [&](int r) { ncclAlltoAll(k.send[r], k.recv[r], c, ncclFloat, k.comms[r], k.streams[r]); }));
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < n; ++r) {
    auto h = k.out(r);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < c; i += 101)
        CHECK(h[q * c + i] == valueOf(q, r * c + i), "alltoall n=%d rank %d", n, r);
  }
  k.fill();
  CHECK_NCCL(group([&](int r) {
    ncclSend(k.send[r], c, ncclFloat, (r + 1) % n, k.comms[r], k.streams[r]);
    ncclRecv(k.recv[r], c, ncclFloat, (r + n - 1) % n, k.comms[r], k.streams[r]);
  }));
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < n; ++r) {
    auto h = k.out(r);
    for (size_t i = 0; i < c; i += 101)
      CHECK(h[i] == valueOf((r + n - 1) % n, i), "sendrecv n=%d rank %d", n, r);
  }
  std::printf("ok   every collective, %d ranks%s\n", n, oneStream ? " on one stream" : "");
}

void orderedOnTheStream(int n) {
  Ranks k(n, 1 << 20, false);
  std::vector<float*> after(n);
  for (int r = 0; r < n; ++r) {
    cudaMalloc(&after[r], k.count * 4);
    fillKernel<<<64, 256, 0, k.streams[r]>>>(k.send[r], k.count, float(r + 1));
  }
  ncclGroupStart();
  for (int r = 0; r < n; ++r)
    ncclAllReduce(k.send[r], k.recv[r], k.count, ncclFloat, ncclSum, k.comms[r], k.streams[r]);
  CHECK_NCCL(ncclGroupEnd());
  for (int r = 0; r < n; ++r)
    doubleKernel<<<64, 256, 0, k.streams[r]>>>(k.recv[r], after[r], k.count);
  CHECK_CUDA(cudaDeviceSynchronize());
  const float want = 2 * float(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r) {
    std::vector<float> h(k.count);
    cudaMemcpy(h.data(), after[r], k.count * 4, cudaMemcpyDeviceToHost);
    cudaFree(after[r]);
    for (size_t i = 0; i < k.count; i += 4099)
      CHECK(h[i] == want, "ordering n=%d rank %d [%zu] = %f", n, r, i, h[i]);
  }
  std::printf("ok   ordered with kernels before and after, %d ranks\n", n);
}

void capturedGraph(int n) {
  Ranks k(n, 4096, false);
  std::vector<cudaGraphExec_t> exec(n);
  for (int r = 0; r < n; ++r)
    CHECK_CUDA(cudaStreamBeginCapture(k.streams[r], cudaStreamCaptureModeGlobal));
  ncclGroupStart();
  for (int r = 0; r < n; ++r)
    ncclAllReduce(k.send[r], k.recv[r], k.count, ncclFloat, ncclSum, k.comms[r], k.streams[r]);
  CHECK_NCCL(ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    cudaGraph_t g;
    CHECK_CUDA(cudaStreamEndCapture(k.streams[r], &g));
    CHECK_CUDA(cudaGraphInstantiate(&exec[r], g, 0));
    cudaGraphDestroy(g);
  }
  for (int replay = 0; replay < 3; ++replay) {
    for (int r = 0; r < n; ++r)
      fillKernel<<<16, 256, 0, k.streams[r]>>>(k.send[r], k.count, float(replay * 10 + r));
    for (int r = 0; r < n; ++r) CHECK_CUDA(cudaGraphLaunch(exec[r], k.streams[r]));
    CHECK_CUDA(cudaDeviceSynchronize());
    float want = 0;
    for (int r = 0; r < n; ++r) want += float(replay * 10 + r);
    for (int r = 0; r < n; ++r) {
      auto h = k.out(r);
      for (size_t i = 0; i < k.count; i += 97)
        CHECK(h[i] == want, "graph replay %d n=%d rank %d", replay, n, r);
    }
  }
  for (auto e : exec) cudaGraphExecDestroy(e);
  std::printf("ok   captured graph replayed 3 times, %d ranks\n", n);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skip: no GPU\n");
    return 77;
  }
  cudaSetDevice(0);
  for (int n = 1; n <= 4; ++n) everyCollective(n, false);
  everyCollective(3, true);
  for (int n : {1, 2, 4}) orderedOnTheStream(n);
  for (int n : {1, 2, 4}) capturedGraph(n);
  std::printf("%s: %d failures\n", gFailures ? "FAILED" : "passed", gFailures);
  return gFailures ? 1 : 0;
}
