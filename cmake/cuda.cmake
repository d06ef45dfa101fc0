# The CUDA build (TUTTI_CUDA=ON; docs/cuda.md). What it adds to the library is C: the driver is
# opened with dlopen (src/device/cuda/driver.c), so libtutti.so links no CUDA library and a
# machine without a GPU or a driver runs it host-only. The toolkit is needed at build time for
# cuda.h, and nvcc for the GPU tests and tutti-perf's device mode (CUDA runtime, static).
find_package(CUDAToolkit REQUIRED)
message(STATUS "Tutti: CUDA build (toolkit ${CUDAToolkit_VERSION} in ${CUDAToolkit_BIN_DIR})")
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  # sm_80 (A100), sm_90 (H100) as machine code, plus PTX for newer GPUs.
  set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
endif()
enable_language(CUDA)

file(GLOB TUTTI_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/device/cuda/*.c)
target_sources(tutti_obj PRIVATE ${TUTTI_CUDA_SOURCES})

# The device reduction kernels: nvcc builds a fatbin that module.c embeds (.incbin) and loads
# through the driver, so no CUDA runtime is linked. -fmad=false: no contraction into FMA, as on
# the host (src/device/cuda/elementwise.h).
set(TUTTI_CUDA_FATBIN ${CMAKE_BINARY_DIR}/tutti-reduce.fatbin)
set(TUTTI_CUDA_GENCODE -gencode arch=compute_80,code=sm_80
                       -gencode arch=compute_90,code=[sm_90,compute_90])
set(TUTTI_NVCC_WERROR "")
if(TUTTI_WERROR)
  set(TUTTI_NVCC_WERROR -Werror all-warnings)
endif()
add_custom_command(OUTPUT ${TUTTI_CUDA_FATBIN}
  COMMAND ${CMAKE_CUDA_COMPILER} --fatbin -O3 -fmad=false ${TUTTI_NVCC_WERROR}
          ${TUTTI_CUDA_GENCODE} -I${CMAKE_SOURCE_DIR}/src -I${CMAKE_SOURCE_DIR}/include
          -x cu ${CMAKE_SOURCE_DIR}/src/device/cuda/reduce.cu -o ${TUTTI_CUDA_FATBIN}
  DEPENDS ${CMAKE_SOURCE_DIR}/src/device/cuda/reduce.cu
          ${CMAKE_SOURCE_DIR}/src/device/cuda/elementwise.h
          ${CMAKE_SOURCE_DIR}/src/device/cuda/sym.h
  COMMENT "nvcc: the device reduction kernels (tutti-reduce.fatbin)" VERBATIM)
set_source_files_properties(${CMAKE_SOURCE_DIR}/src/device/cuda/module.c PROPERTIES
  OBJECT_DEPENDS ${TUTTI_CUDA_FATBIN}
  COMPILE_DEFINITIONS "TT_CUDA_FATBIN_PATH=\"${TUTTI_CUDA_FATBIN}\"")
# Every file sees TUTTI_CUDA (device/device.h changes shape); only src/device/cuda/ sees cuda.h,
# as a system header so that -Wpedantic judges our code, not NVIDIA's.
add_compile_definitions(TUTTI_CUDA=1)
foreach(inc ${CUDAToolkit_INCLUDE_DIRS})
  set_property(SOURCE ${TUTTI_CUDA_SOURCES} APPEND PROPERTY COMPILE_OPTIONS "-isystem${inc}")
endforeach()
target_link_libraries(tutti_obj PRIVATE ${CMAKE_DL_LIBS})

# nvcc warnings are errors too in the CUDA tests and tools (-Werror applies to the host side
# through -Xcompiler, to nvcc's own diagnostics through -Werror all-warnings).
set(TUTTI_CUDA_WARNINGS -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
if(TUTTI_WERROR)
  list(APPEND TUTTI_CUDA_WARNINGS -Werror=all-warnings -Xcompiler=-Werror)
endif()
