# tutti-run, the launcher: a standalone program (it does not link libtutti), built at the top
# of the build directory; --bind places ranks with the tools' topology (tools/topo.cmake).
add_executable(tutti-run ${CMAKE_SOURCE_DIR}/tools/tutti-run.c ${CMAKE_SOURCE_DIR}/tools/tutti-run-setup.c
               ${CMAKE_SOURCE_DIR}/tools/tutti-run-guard.c)
target_include_directories(tutti-run PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_compile_options(tutti-run PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(tutti-run PRIVATE m tutti_topo)
