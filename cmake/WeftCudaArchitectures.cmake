# The GPU architectures the CUDA parts compile for, unless the user sets CMAKE_CUDA_ARCHITECTURES:
# PTX for the oldest architecture the toolkit supports from sm_70 on (sm_70 up to CUDA 12, sm_75
# from CUDA 13, which dropped Volta), which the driver compiles for any newer GPU at first load
# (and caches); with WEFT_CUDA_SASS also machine code (SASS) for sm_80, sm_90 and sm_100 where the
# toolkit has them, so those GPUs start without that compile. Machine code costs most of the
# build's time (ptxas runs once per architecture on the large interpreter kernel), so it is on by
# default only where the build machine has a GPU to run it (`nvidia-smi -L` lists one); release
# packages and GPU machines' builds turn it on.
# A value this file chose before (WEFT_CUDA_ARCHS_CHOSEN) is chosen again, so that a change of
# WEFT_CUDA_SASS takes effect in an existing build folder; a value of the user's stays.
if(DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT CMAKE_CUDA_ARCHITECTURES STREQUAL "" AND
   NOT CMAKE_CUDA_ARCHITECTURES STREQUAL "${WEFT_CUDA_ARCHS_CHOSEN}")
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
set(weft_gpu_here OFF)
execute_process(COMMAND nvidia-smi -L OUTPUT_VARIABLE weft_gpus ERROR_QUIET RESULT_VARIABLE weft_smi_rc)
if(weft_smi_rc EQUAL 0 AND weft_gpus MATCHES "GPU [0-9]")
  set(weft_gpu_here ON)
endif()
option(WEFT_CUDA_SASS "Also compile machine code for sm_80, sm_90 and sm_100" ${weft_gpu_here})
if(WEFT_CUDA_SASS)
  foreach(arch 80 90 100)
    if("compute_${arch}" IN_LIST weft_nvcc_archs)
      list(APPEND weft_archs ${arch}-real)
    endif()
  endforeach()
endif()
set(CMAKE_CUDA_ARCHITECTURES "${weft_archs}" CACHE STRING "GPU architectures for the CUDA parts" FORCE)
set(WEFT_CUDA_ARCHS_CHOSEN "${weft_archs}" CACHE INTERNAL "CMAKE_CUDA_ARCHITECTURES as chosen here")
