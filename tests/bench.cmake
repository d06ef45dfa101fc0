# The C programs of bench/ that bench scripts build on their own (bench/deepspeed, bench/hosts,
# bench/tcp_shapes) or that a reader builds by hand (their head comments), compiled here too with
# the project's warnings, so that a change to the API or the library cannot leave them broken
# unnoticed. Built, not run: they time things, and timings are not tests (bench/README.md).
foreach(prog lat8 percall between_calls enqueue_wait)
  add_executable(bench_${prog} ${CMAKE_SOURCE_DIR}/bench/${prog}.c)
  target_link_libraries(bench_${prog} PRIVATE tutti m)
  target_compile_options(bench_${prog} PRIVATE ${TUTTI_WARNINGS})
endforeach()
foreach(prog tcp_shapes membw)
  add_executable(bench_${prog} ${CMAKE_SOURCE_DIR}/bench/${prog}.c)
  target_link_libraries(bench_${prog} PRIVATE Threads::Threads m)
  target_compile_options(bench_${prog} PRIVATE ${TUTTI_WARNINGS})
endforeach()
