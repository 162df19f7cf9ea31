// Device-side reduction kernels for the CUDA backend (built only when nvcc is found). The host
// executor's kernels live in src/common/reduce.*; these mirror them for device memory.
#pragma once
#include <cstddef>

#include "src/common/datatype.h"

namespace weft::cuda {

// Launches dst[i] = a[i] (op) b[i] on `stream` (a cudaStream_t); returns a cudaError_t as int.
int launchReduce(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count,
                 void* stream);

}  // namespace weft::cuda
