# tutti-perf, the nccl-tests-style benchmark; its checker is the test harness's reference.
add_executable(tutti-perf ${CMAKE_SOURCE_DIR}/tools/tutti-perf.c
                          ${CMAKE_SOURCE_DIR}/tools/tutti-perf-options.c
                          ${CMAKE_SOURCE_DIR}/tests/harness.c)
target_include_directories(tutti-perf PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_compile_options(tutti-perf PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(tutti-perf PRIVATE tutti m)
