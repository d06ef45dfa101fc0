# Unit test of the reduction kernels and of the small-float conversions (src/reduce), checked bit
# for bit against an independent reference written in the test, at every kernel level the CPU
# has. It builds the module (TUTTI_REDUCE_SOURCES, with its compile options, from the top-level
# CMakeLists.txt) with the util files it logs through, so it does not wait on the rest of the
# library.
add_executable(unit_reduce tests/unit_reduce.c ${TUTTI_REDUCE_SOURCES} src/util/log.c
               src/util/param.c)
target_include_directories(unit_reduce PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(unit_reduce PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(unit_reduce PRIVATE Threads::Threads m)
add_test(NAME unit_reduce COMMAND unit_reduce)
set_tests_properties(unit_reduce PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77)
