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

# A buffer deregistered (or registered) while an AllReduce queued on a stream still uses it, on
# the single-copy path whose peers map the buffer's memory file (tests/api_memory.c,
# test_register_in_flight).
if(TARGET tutti-run)
  add_test(NAME api_memory_in_flight
           COMMAND $<TARGET_FILE:tutti-run> -n 4 --timeout 110 $<TARGET_FILE:api_memory> in_flight)
  set_tests_properties(api_memory_in_flight PROPERTIES LABELS api TIMEOUT 120 PROCESSORS 2
                       ENVIRONMENT "TUTTI_TIMEOUT_MS=30000;NCCL_ALGO=Direct" SKIP_RETURN_CODE 77)
  # The ranks' promise of shareable buffers (TUTTI_SHAREABLE_BYTES) decides Direct where
  # cross-memory copies are priced out of reach; without it, another algorithm runs.
  foreach(promise 0 1048576)
    add_test(NAME api_memory_shareable_${promise}
             COMMAND $<TARGET_FILE:tutti-run> -n 4 --timeout 110
                     $<TARGET_FILE:api_memory> shareable)
    set(env "TUTTI_TIMEOUT_MS=30000;TUTTI_STATS=1;TUTTI_CMA_COST=5000")
    set_tests_properties(api_memory_shareable_${promise} PROPERTIES LABELS api TIMEOUT 120
                         PROCESSORS 2 SKIP_RETURN_CODE 77
                         ENVIRONMENT "${env};TUTTI_SHAREABLE_BYTES=${promise}")
  endforeach()
endif()
