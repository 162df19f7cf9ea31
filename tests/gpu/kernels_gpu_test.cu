// GPU check of the shared device code, without GoogleTest (the GPU machine may lack it): the
// element kernels for every type, operator and PreMulSum form against the host kernels bit for
// bit, on random bit patterns (NaNs and infinities included); and the LL protocol between two
// thread blocks through one reused buffer. Exit status 0: pass, 1: a failure, 77: no GPU (skip).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "src/common/reduce.h"
#include "src/cuda/ll_protocol.h"
#include "tests/gpu/reduce_kernels.h"

namespace {

int gFailures = 0;

#define CHECK_CUDA(call)                                                                      \
  do {                                                                                        \
    cudaError_t rc_ = (call);                                                                 \
    if (rc_ != cudaSuccess) {                                                                 \
      std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(rc_)); \
      return false;                                                                           \
    }                                                                                         \
  } while (0)

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { cudaMalloc(&ptr, bytes); }
  ~DeviceBuffer() { cudaFree(ptr); }
};

// One case: device reduce (or scaled copy) of random inputs equals the host kernels' bits.
bool checkReduce(weft::DataType t, weft::RedOp op, bool scaleA, bool scaleB, bool copyOnly,
                 size_t count, std::mt19937_64& rng) {
  const size_t bytes = count * weft::dataTypeSize(t);
  std::vector<unsigned char> a(bytes), b(bytes), want(bytes), got(bytes);
  for (auto& x : a) x = static_cast<unsigned char>(rng());
  for (auto& x : b) x = static_cast<unsigned char>(rng());
  weft::Scalar scalar = weft::reciprocalScalar(t, 3);
  if (!weft::isFloating(t)) scalar.bytes[0] = 3;  // integer PreMulSum: multiply by 3
  const bool scaled = scaleA || scaleB || copyOnly;
  if (copyOnly)
    weft::copyElements(t, want.data(), a.data(), count, &scalar);
  else
    weft::reduce(t, op, want.data(), a.data(), scaleA, b.data(), scaleB, count,
                 scaled ? &scalar : nullptr);
  DeviceBuffer da(bytes), db(bytes), dd(bytes);
  CHECK_CUDA(cudaMemcpy(da.ptr, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db.ptr, b.data(), bytes, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  const int rc = copyOnly ? weft::cuda::launchCopy(t, dd.ptr, da.ptr, count, &scalar, stream)
                          : weft::cuda::launchReduce(t, op, dd.ptr, da.ptr, scaleA, db.ptr, scaleB,
                                                     count, scaled ? &scalar : nullptr, stream);
  CHECK_CUDA(static_cast<cudaError_t>(rc));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaMemcpy(got.data(), dd.ptr, bytes, cudaMemcpyDeviceToHost));
  const size_t size = weft::dataTypeSize(t);
  size_t wrong = 0, first = count;
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(&got[i * size], &want[i * size], size) != 0) {
      if (first == count) first = i;
      ++wrong;
    }
  if (wrong) {
    std::printf("FAIL reduce %s %s%s%s%s: %zu of %zu elements differ from the host (first %zu)\n",
                weft::dataTypeName(t), copyOnly ? "scaled copy" : weft::redOpName(op),
                scaleA ? " scaleA" : "", scaleB ? " scaleB" : "", "", wrong, count, first);
    return false;
  }
  return true;
}

// LL between two blocks: block 0 writes `rounds` messages into one buffer of lines, block 1 reads
// each into its own slot of `out`; `ack` holds the rounds block 1 finished (back-pressure).
__global__ void llExchange(weft::ll::Line* lines, const unsigned char* msgs, unsigned char* out,
                           size_t bytes, uint32_t rounds, unsigned* ack, int* timedOut) {
  const long long limit = 20'000'000'000LL;  // clock cycles: ~10 s, then give up
  const long long start = clock64();
  const size_t n = weft::ll::linesFor(bytes);
  for (uint32_t round = 1; round <= rounds; ++round) {
    if (blockIdx.x == 0) {
      if (threadIdx.x == 0)
        while (*static_cast<volatile unsigned*>(ack) + 1 < round && !*timedOut)
          if (clock64() - start > limit) *timedOut = 1;
      __syncthreads();
      weft::ll::write(lines, msgs + (round - 1) * bytes, bytes, round, threadIdx.x, blockDim.x);
    } else {
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        uint64_t v = 0;
        while (!weft::ll::loadLine(&lines[i], round, &v))
          if (clock64() - start > limit || *static_cast<volatile int*>(timedOut)) {
            *timedOut = 1;
            return;
          }
        weft::ll::unpackPayload(out + (round - 1) * bytes, bytes, i, v);
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        atomicExch(ack, round);
      }
    }
    if (*static_cast<volatile int*>(timedOut)) return;
  }
}

bool checkLl() {
  const size_t bytes = 4099;
  const uint32_t rounds = 64;
  std::vector<unsigned char> msgs(bytes * rounds), out(bytes * rounds);
  for (size_t i = 0; i < msgs.size(); ++i) msgs[i] = static_cast<unsigned char>(i * 13 + i / 4099);
  DeviceBuffer dLines(weft::ll::linesFor(bytes) * sizeof(weft::ll::Line)), dMsgs(msgs.size()),
      dOut(out.size()), dAck(sizeof(unsigned)), dTimedOut(sizeof(int));
  CHECK_CUDA(cudaMemset(dLines.ptr, 0, weft::ll::linesFor(bytes) * sizeof(weft::ll::Line)));
  CHECK_CUDA(cudaMemset(dAck.ptr, 0, sizeof(unsigned)));
  CHECK_CUDA(cudaMemset(dTimedOut.ptr, 0, sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dMsgs.ptr, msgs.data(), msgs.size(), cudaMemcpyHostToDevice));
  llExchange<<<2, 128>>>(static_cast<weft::ll::Line*>(dLines.ptr),
                         static_cast<unsigned char*>(dMsgs.ptr),
                         static_cast<unsigned char*>(dOut.ptr), bytes, rounds,
                         static_cast<unsigned*>(dAck.ptr), static_cast<int*>(dTimedOut.ptr));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  int timedOut = 0;
  CHECK_CUDA(cudaMemcpy(&timedOut, dTimedOut.ptr, sizeof timedOut, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(out.data(), dOut.ptr, out.size(), cudaMemcpyDeviceToHost));
  if (timedOut) {
    std::printf("FAIL ll: the exchange between two blocks timed out\n");
    return false;
  }
  if (out != msgs) {
    std::printf("FAIL ll: received bytes differ from those sent\n");
    return false;
  }
  return true;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP kernels_gpu_test: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("kernels_gpu_test on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  std::mt19937_64 rng(42);
  int cases = 0;
  const weft::RedOp ops[] = {weft::RedOp::kSum, weft::RedOp::kProd, weft::RedOp::kMax,
                             weft::RedOp::kMin};
  for (int ti = 0; ti < weft::kNumDataTypes; ++ti) {
    const auto t = static_cast<weft::DataType>(ti);
    for (size_t count : {size_t{1}, size_t{1000003}}) {
      for (weft::RedOp op : ops)
        gFailures += !checkReduce(t, op, false, false, false, count, rng), ++cases;
      gFailures += !checkReduce(t, weft::RedOp::kPreMulSum, true, false, false, count, rng),
          ++cases;
      gFailures += !checkReduce(t, weft::RedOp::kPreMulSum, false, true, false, count, rng),
          ++cases;
      gFailures += !checkReduce(t, weft::RedOp::kPreMulSum, true, true, false, count, rng), ++cases;
      gFailures += !checkReduce(t, weft::RedOp::kSum, false, false, true, count, rng), ++cases;
    }
  }
  gFailures += !checkLl(), ++cases;
  std::printf("kernels_gpu_test: %d cases, %d failed\n", cases, gFailures);
  return gFailures ? 1 : 0;
}
