# Communicators made from communicators and user operators (tests/api_lifecycle.c), and memory,
# registrations and windows (tests/api_memory.c), label api: each runs as all 4 ranks under
# tutti-run, once over shared memory and once over TCP only. Every wait fails on its own
# deadline well before CTest's timeout.
foreach(prog api_lifecycle api_memory)
  add_executable(${prog} tests/${prog}.c)
  target_link_libraries(${prog} PRIVATE tutti Threads::Threads)
  target_compile_options(${prog} PRIVATE ${TUTTI_WARNINGS})

  if(TARGET tutti-run)
    foreach(transport shm tcp)
      set(env "TUTTI_TIMEOUT_MS=30000")
      if(transport STREQUAL "tcp")
        list(APPEND env "NCCL_SHM_DISABLE=1")
      endif()
      add_test(NAME ${prog}_${transport}
               COMMAND $<TARGET_FILE:tutti-run> -n 4 --timeout 110 $<TARGET_FILE:${prog}>)
      set_tests_properties(${prog}_${transport} PROPERTIES LABELS api TIMEOUT 120
                           ENVIRONMENT "${env}" PROCESSORS 2 SKIP_RETURN_CODE 77)
    endforeach()
  endif()
endforeach()
