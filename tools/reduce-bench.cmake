# reduce-bench, the micro-benchmark of the reduction kernels (not a test). Like unit_reduce it
# builds the module from its sources (TUTTI_REDUCE_SOURCES, from the top-level CMakeLists.txt)
# with the util files it logs through, so it does not wait on the rest of the library.
add_executable(reduce-bench tools/reduce-bench.c ${TUTTI_REDUCE_SOURCES} src/util/log.c
               src/util/param.c)
target_include_directories(reduce-bench PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(reduce-bench PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(reduce-bench PRIVATE Threads::Threads m)
