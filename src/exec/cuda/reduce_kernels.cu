#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "src/exec/cuda/reduce_kernels.h"

namespace weft::cuda {
namespace {

// Like the host kernels, narrow floats are computed in fp32 and rounded once per operation.
template <typename T>
__device__ float toF(T v) { return static_cast<float>(v); }
template <>
__device__ float toF<__half>(__half v) { return __half2float(v); }
template <>
__device__ float toF<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ T fromF(float v) { return static_cast<T>(v); }
template <>
__device__ __half fromF<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __nv_bfloat16 fromF<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T, typename Acc>
__device__ Acc apply(RedOp op, Acc x, Acc y) {
  switch (op) {
    case RedOp::kProd: return x * y;
    case RedOp::kMax: return x > y ? x : y;
    case RedOp::kMin: return x < y ? x : y;
    default: return x + y;
  }
}

template <typename T>
__global__ void reduceKernel(RedOp op, T* dst, const T* a, const T* b, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(T) == 2 && !std::is_integral_v<T>) {
      dst[i] = fromF<T>(apply<T, float>(op, toF(a[i]), toF(b[i])));
    } else {
      dst[i] = apply<T, T>(op, a[i], b[i]);
    }
  }
}

template <typename T>
int launch(RedOp op, void* dst, const void* a, const void* b, size_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const int blocks = static_cast<int>((n + threads - 1) / threads < 1024 ? (n + threads - 1) / threads : 1024);
  reduceKernel<T><<<blocks, threads, 0, s>>>(op, static_cast<T*>(dst), static_cast<const T*>(a),
                                             static_cast<const T*>(b), n);
  return cudaGetLastError();
}

}  // namespace

int launchReduce(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count,
                 void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case DataType::kInt8: return launch<int8_t>(op, dst, a, b, count, s);
    case DataType::kUint8: return launch<uint8_t>(op, dst, a, b, count, s);
    case DataType::kInt32: return launch<int32_t>(op, dst, a, b, count, s);
    case DataType::kUint32: return launch<uint32_t>(op, dst, a, b, count, s);
    case DataType::kInt64: return launch<int64_t>(op, dst, a, b, count, s);
    case DataType::kUint64: return launch<uint64_t>(op, dst, a, b, count, s);
    case DataType::kFloat16: return launch<__half>(op, dst, a, b, count, s);
    case DataType::kFloat32: return launch<float>(op, dst, a, b, count, s);
    case DataType::kFloat64: return launch<double>(op, dst, a, b, count, s);
    case DataType::kBfloat16: return launch<__nv_bfloat16>(op, dst, a, b, count, s);
    default: return cudaErrorNotSupported;  // fp8 arrives with the CUDA backend
  }
}

}  // namespace weft::cuda
