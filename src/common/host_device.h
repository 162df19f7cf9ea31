// WEFT_HD marks code that both the host executor and the CUDA kernels compile: under nvcc it is
// __host__ __device__, in plain C++ nothing. Such code must use neither the C++ library's
// run-time functions (memcpy, atomics, iostreams) nor exceptions; type traits are fine.
#pragma once

#if defined(__CUDACC__)
#define WEFT_HD __host__ __device__
#define WEFT_HD_INLINE __host__ __device__ __forceinline__
#else
#define WEFT_HD
#define WEFT_HD_INLINE inline
#endif
