# weft_cuda_image(<source-var> CU <file.cu> NAME <identifier> INCLUDES <dir>...)
#
# Compiles a .cu file's device code with nvcc into a fatbin for every architecture in
# CMAKE_CUDA_ARCHITECTURES and embeds it in a generated C++ source (WeftEmbedBinary.cmake:
# weft::embedded::<NAME> and <NAME>_bytes), whose path goes to <source-var>. The library loads
# the image with the driver's cuModuleLoadData, so it needs no CUDA runtime.
#
# Architectures as CMake reads them: "NN-real" is machine code for sm_NN, "NN-virtual" PTX for
# compute_NN, a plain "NN" both; "all", "all-major" and "native" go to nvcc as they are. A list
# without PTX gets the PTX of its highest architecture, so a newer GPU compiles that instead.
# Device code without fused multiply-add (--fmad=false), as every kernel of the library.
set(WEFT_CUDA_IMAGE_DIR ${CMAKE_CURRENT_LIST_DIR})

function(weft_cuda_image source_var)
  cmake_parse_arguments(A "" "CU;NAME" "INCLUDES" ${ARGN})
  set(gencode "")
  set(has_ptx FALSE)
  set(highest 0)
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    if(arch MATCHES "^(all|all-major|native)$")
      list(APPEND gencode "-arch=${arch}")
      set(has_ptx TRUE)
    elseif(arch MATCHES "^([0-9]+[a-z]?)-real$")
      list(APPEND gencode "-gencode=arch=compute_${CMAKE_MATCH_1},code=sm_${CMAKE_MATCH_1}")
    elseif(arch MATCHES "^([0-9]+[a-z]?)-virtual$")
      list(APPEND gencode "-gencode=arch=compute_${CMAKE_MATCH_1},code=compute_${CMAKE_MATCH_1}")
      set(has_ptx TRUE)
    elseif(arch MATCHES "^([0-9]+[a-z]?)$")
      list(APPEND gencode
           "-gencode=arch=compute_${arch},code=[sm_${arch},compute_${arch}]")
      set(has_ptx TRUE)
    else()
      message(FATAL_ERROR "weft_cuda_image: CMAKE_CUDA_ARCHITECTURES entry '${arch}' not understood")
    endif()
    if(CMAKE_MATCH_1 MATCHES "^([0-9]+)")
      if(CMAKE_MATCH_1 GREATER highest)
        set(highest ${CMAKE_MATCH_1})
      endif()
    endif()
  endforeach()
  if(NOT has_ptx AND highest GREATER 0)
    list(APPEND gencode "-gencode=arch=compute_${highest},code=compute_${highest}")
  endif()
  if(NOT gencode)
    message(FATAL_ERROR "weft_cuda_image: CMAKE_CUDA_ARCHITECTURES is empty")
  endif()
  set(includes "")
  foreach(dir IN LISTS A_INCLUDES)
    list(APPEND includes "-I${dir}")
  endforeach()
  set(fatbin ${A_NAME}.fatbin)
  set(source ${CMAKE_CURRENT_BINARY_DIR}/${A_NAME}_image.cc)
  add_custom_command(
    OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/${fatbin}
    COMMAND ${CMAKE_CUDA_COMPILER} -fatbin -std=c++17 --fmad=false ${gencode} ${includes}
            -MD -MF ${fatbin}.d -o ${fatbin} ${A_CU}
    DEPENDS ${A_CU}
    DEPFILE ${CMAKE_CURRENT_BINARY_DIR}/${fatbin}.d
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
    COMMENT "Compiling the device image ${fatbin}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${source}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${CMAKE_CURRENT_BINARY_DIR}/${fatbin} -DOUTPUT=${source}
            -DNAME=${A_NAME} -P ${WEFT_CUDA_IMAGE_DIR}/WeftEmbedBinary.cmake
    DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/${fatbin} ${WEFT_CUDA_IMAGE_DIR}/WeftEmbedBinary.cmake
    COMMENT "Embedding ${fatbin}"
    VERBATIM)
  set(${source_var} ${source} PARENT_SCOPE)
endfunction()
