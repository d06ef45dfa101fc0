# Unit tests of src/reduce, checked bit for bit against an independent reference written in the
# tests (tests/unit_reduce_common.c): unit_reduce runs the reduction kernels at every kernel level
# the CPU has, unit_reduce_dtypes the small-float conversions and the op and dtype resolution.
# They build the module (TUTTI_REDUCE_SOURCES, with its compile options, from the top-level
# CMakeLists.txt) with the util files it logs through, once for both, so that they do not wait on
# the rest of the library.
add_library(unit_reduce_deps OBJECT ${TUTTI_REDUCE_SOURCES} src/util/log.c src/util/param.c
            tests/unit_reduce_common.c)
target_include_directories(unit_reduce_deps PUBLIC ${CMAKE_SOURCE_DIR}/src
                                                   ${CMAKE_SOURCE_DIR}/include)
target_compile_options(unit_reduce_deps PRIVATE ${TUTTI_WARNINGS})
foreach(t unit_reduce unit_reduce_dtypes)
  add_executable(${t} tests/${t}.c $<TARGET_OBJECTS:unit_reduce_deps>)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  target_compile_options(${t} PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(${t} PRIVATE Threads::Threads m)
  add_test(NAME ${t} COMMAND ${t})
endforeach()
set_tests_properties(unit_reduce unit_reduce_dtypes PROPERTIES LABELS unit TIMEOUT 120
                     SKIP_RETURN_CODE 77)
