// The GPU's device-to-device copy bandwidth (cudaMemcpy of 256 MiB, best of 10), the reference
// for the collectives' memory-traffic bound in tests/gpu/run.sh. Prints "d2d_GBps <value>".
// Exit status 0, or 77 with no GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skip: no GPU\n");
    return 77;
  }
  const size_t bytes = size_t(256) << 20;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 1;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float best = 1e30f;
  for (int i = 0; i < 11; ++i) {
    cudaEventRecord(start);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i > 0) best = std::min(best, ms);  // the first warms up
  }
  // A copy reads and writes every byte: the memory moves 2 x bytes.
  std::printf("d2d_GBps %.1f (copy of %zu MiB in %.3f ms; memory traffic %.1f GB/s)\n",
              bytes / (best * 1e6), bytes >> 20, best, 2 * bytes / (best * 1e6));
  cudaFree(a);
  cudaFree(b);
  return 0;
}
