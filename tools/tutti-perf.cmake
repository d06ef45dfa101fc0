# tutti-perf, the nccl-tests-style benchmark; its checker is the test harness's reference. In
# CUDA builds its device mode (-G) links the static CUDA runtime (tutti-perf-cuda.c); the library
# itself never links CUDA.
if(TUTTI_CUDA)
  set(TUTTI_PERF_DEVICE ${CMAKE_SOURCE_DIR}/tools/tutti-perf-cuda.c)
else()
  set(TUTTI_PERF_DEVICE ${CMAKE_SOURCE_DIR}/tools/tutti-perf-nocuda.c)
endif()
add_executable(tutti-perf ${CMAKE_SOURCE_DIR}/tools/tutti-perf.c
                          ${CMAKE_SOURCE_DIR}/tools/tutti-perf-options.c
                          ${TUTTI_PERF_DEVICE}
                          ${CMAKE_SOURCE_DIR}/tests/harness.c)
target_include_directories(tutti-perf PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_compile_options(tutti-perf PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(tutti-perf PRIVATE tutti m)
if(TUTTI_CUDA)
  foreach(inc ${CUDAToolkit_INCLUDE_DIRS})
    set_property(SOURCE ${CMAKE_SOURCE_DIR}/tools/tutti-perf.c ${TUTTI_PERF_DEVICE}
                 APPEND PROPERTY COMPILE_OPTIONS "-isystem${inc}")
  endforeach()
  target_link_libraries(tutti-perf PRIVATE CUDA::cudart_static)
endif()
