# The GPU architectures the CUDA parts compile for, unless the user sets CMAKE_CUDA_ARCHITECTURES:
# machine code (SASS) for sm_80, sm_90 and sm_100 where the toolkit has them, plus PTX for the
# oldest architecture it supports from sm_70 on (sm_70 up to CUDA 12, sm_75 from CUDA 13, which
# dropped Volta). The driver compiles that PTX for any GPU without its own SASS (sm_70, sm_75,
# sm_86, sm_89, sm_120...), so every GPU from the oldest supported one on runs, while the build
# compiles each kernel only four times (the CI machine has two cores).
if(DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  return()
endif()
execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch
                OUTPUT_VARIABLE weft_nvcc_archs ERROR_QUIET RESULT_VARIABLE weft_nvcc_rc)
if(NOT weft_nvcc_rc EQUAL 0)
  # nvcc before 11.0 has no --list-gpu-arch; it supports sm_70 and sm_80 at most.
  set(weft_nvcc_archs "compute_70\ncompute_80")
endif()
string(REGEX MATCHALL "compute_[0-9]+" weft_nvcc_archs "${weft_nvcc_archs}")
set(weft_archs "")
foreach(arch 70 75)
  if("compute_${arch}" IN_LIST weft_nvcc_archs)
    list(APPEND weft_archs ${arch}-virtual)
    break()
  endif()
endforeach()
foreach(arch 80 90 100)
  if("compute_${arch}" IN_LIST weft_nvcc_archs)
    list(APPEND weft_archs ${arch}-real)
  endif()
endforeach()
set(CMAKE_CUDA_ARCHITECTURES "${weft_archs}" CACHE STRING "GPU architectures for the CUDA parts")
