// Device-side element kernels for the CUDA backend (built only when nvcc is found). They compile
// the host kernels' element arithmetic (src/common/reduce_elements.h), so every type and
// operator rounds exactly as the host executor does.
#pragma once
#include <cstddef>

#include "src/common/datatype.h"

namespace weft::cuda {

// Launches dst[i] = A(a[i]) op B(b[i]) on `stream` (a cudaStream_t), where A(x) = x * scalar when
// scaleA is set (PreMulSum), else x; like weft::reduce(). op is Sum, Prod, Max, Min or PreMulSum
// (which reduces with Sum); `scalar` may be null when neither operand is scaled. dst may alias a
// or b. Returns a cudaError_t as int (cudaErrorInvalidValue for an invalid type or op).
int launchReduce(DataType type, RedOp op, void* dst, const void* a, bool scaleA, const void* b,
                 bool scaleB, size_t count, const Scalar* scalar, void* stream);

// Launches dst[i] = scalar ? src[i] * *scalar : src[i] on `stream`, like weft::copyElements();
// the unscaled copy is a plain byte copy. Returns a cudaError_t as int.
int launchCopy(DataType type, void* dst, const void* src, size_t count, const Scalar* scalar,
               void* stream);

}  // namespace weft::cuda
