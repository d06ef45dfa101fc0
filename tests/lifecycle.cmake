# Communicators made from communicators, user operators and memory (label api):
# tests/api_lifecycle.c runs as all 4 ranks under tutti-run, once over shared memory and once
# over TCP only. Every wait fails on its own deadline well before CTest's timeout.
add_executable(api_lifecycle tests/api_lifecycle.c)
target_link_libraries(api_lifecycle PRIVATE tutti Threads::Threads)
target_compile_options(api_lifecycle PRIVATE ${TUTTI_WARNINGS})

if(TARGET tutti-run)
  foreach(transport shm tcp)
    set(env "TUTTI_TIMEOUT_MS=30000")
    if(transport STREQUAL "tcp")
      list(APPEND env "NCCL_SHM_DISABLE=1")
    endif()
    add_test(NAME api_lifecycle_${transport}
             COMMAND $<TARGET_FILE:tutti-run> -n 4 --timeout 110 $<TARGET_FILE:api_lifecycle>)
    set_tests_properties(api_lifecycle_${transport} PROPERTIES LABELS api TIMEOUT 120
                         ENVIRONMENT "${env}" PROCESSORS 2 SKIP_RETURN_CODE 77)
  endforeach()
endif()
