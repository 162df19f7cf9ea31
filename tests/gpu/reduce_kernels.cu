// The CUDA element kernels: grid-stride loops over the shared element arithmetic.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "src/common/reduce_elements.h"
#include "tests/gpu/reduce_kernels.h"

namespace weft::cuda {
namespace {

using elements::OpMax;
using elements::OpMin;
using elements::OpProd;
using elements::OpSum;

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 1024;  // grid-stride beyond this: enough to fill any current GPU

int blocksFor(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

template <class E, class Op, bool kScaleA, bool kScaleB>
__global__ void reduceKernel(typename E::Storage* dst, const typename E::Storage* a,
                             const typename E::Storage* b, size_t n, typename E::Calc sa,
                             typename E::Calc sb) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
    dst[i] = elements::combine<E, Op, kScaleA, kScaleB>(a[i], b[i], sa, sb);
}

template <class E>
__global__ void scaleKernel(typename E::Storage* dst, const typename E::Storage* src, size_t n,
                            typename E::Calc s) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
    dst[i] = elements::scale<E>(src[i], s);
}

// The scalar as the element type's arithmetic value (read on the host, from its own bytes).
template <class E>
typename E::Calc scalarValue(const Scalar* scalar) {
  typename E::Storage v{};
  if (scalar) std::memcpy(&v, scalar->bytes, sizeof v);
  return E::toCalc(v);
}

template <class E, class Op, bool kScaleA, bool kScaleB>
int launchOne(void* dst, const void* a, const void* b, size_t n, const Scalar* scalar,
              cudaStream_t s) {
  using S = typename E::Storage;
  const auto value = scalarValue<E>(scalar);
  reduceKernel<E, Op, kScaleA, kScaleB><<<blocksFor(n), kThreads, 0, s>>>(
      static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), n, value, value);
  return cudaGetLastError();
}

template <class E>
int launchTyped(RedOp op, void* dst, const void* a, bool scaleA, const void* b, bool scaleB,
                size_t n, const Scalar* scalar, cudaStream_t s) {
  if (scaleA || scaleB) {
    if (op != RedOp::kSum && op != RedOp::kPreMulSum) return cudaErrorInvalidValue;
    if (scaleA && scaleB) return launchOne<E, OpSum, true, true>(dst, a, b, n, scalar, s);
    if (scaleA) return launchOne<E, OpSum, true, false>(dst, a, b, n, scalar, s);
    return launchOne<E, OpSum, false, true>(dst, a, b, n, scalar, s);
  }
  switch (op) {
    case RedOp::kSum:
    case RedOp::kPreMulSum:
      return launchOne<E, OpSum, false, false>(dst, a, b, n, scalar, s);
    case RedOp::kProd:
      return launchOne<E, OpProd, false, false>(dst, a, b, n, scalar, s);
    case RedOp::kMax:
      return launchOne<E, OpMax, false, false>(dst, a, b, n, scalar, s);
    case RedOp::kMin:
      return launchOne<E, OpMin, false, false>(dst, a, b, n, scalar, s);
    default:
      return cudaErrorInvalidValue;  // Avg is lowered by the core and never reaches a kernel
  }
}

}  // namespace

int launchReduce(DataType type, RedOp op, void* dst, const void* a, bool scaleA, const void* b,
                 bool scaleB, size_t count, const Scalar* scalar, void* stream) {
  if ((scaleA || scaleB) && !scalar) return cudaErrorInvalidValue;
  if (count == 0) return isValid(type) ? cudaSuccess : cudaErrorInvalidValue;
  int rc = cudaErrorInvalidValue;
  elements::withElem(type, [&](auto e) {
    rc = launchTyped<decltype(e)>(op, dst, a, scaleA, b, scaleB, count, scalar,
                                  static_cast<cudaStream_t>(stream));
  });
  return rc;
}

int launchCopy(DataType type, void* dst, const void* src, size_t count, const Scalar* scalar,
               void* stream) {
  if (!isValid(type)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  if (count == 0 || (!scalar && dst == src)) return cudaSuccess;
  if (!scalar)
    return cudaMemcpyAsync(dst, src, count * dataTypeSize(type), cudaMemcpyDeviceToDevice, s);
  int rc = cudaErrorInvalidValue;
  elements::withElem(type, [&](auto e) {
    using E = decltype(e);
    using S = typename E::Storage;
    scaleKernel<E><<<blocksFor(count), kThreads, 0, s>>>(
        static_cast<S*>(dst), static_cast<const S*>(src), count, scalarValue<E>(scalar));
    rc = cudaGetLastError();
  });
  return rc;
}

}  // namespace weft::cuda
