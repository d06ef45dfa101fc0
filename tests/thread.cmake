# Threads inside one rank (label thread): tests/thread_comm.c at 3 ranks under tutti-run, and at
# 2 over TCP (NCCL_SHM_DISABLE=1), where a proxy thread serves the sockets. The tsan preset
# builds everything with ThreadSanitizer, and `make tsan` runs this label there.
# The abort case (ncclCommAbort while another thread is blocked in a call) has an entry of its
# own: Abort waits for the threads inside calls to leave them (docs/semantics.md, "Threads").
if(TARGET tutti-run)
  add_executable(thread_comm ${CMAKE_SOURCE_DIR}/tests/thread_comm.c)
  target_compile_options(thread_comm PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(thread_comm PRIVATE tutti Threads::Threads)
  foreach(case n3 n2_tcp abort_n2)
    if(case STREQUAL "n3")
      set(args -n 3 --timeout 170 $<TARGET_FILE:thread_comm>)
    elseif(case STREQUAL "n2_tcp")
      set(args -n 2 --timeout 170 $<TARGET_FILE:thread_comm> two_comms shared_comm stream abort)
    else()
      set(args -n 2 --timeout 50 $<TARGET_FILE:thread_comm> abort)
    endif()
    add_test(NAME thread_comm_${case} COMMAND $<TARGET_FILE:tutti-run> ${args})
    set_tests_properties(thread_comm_${case} PROPERTIES LABELS thread PROCESSORS 2
                         ENVIRONMENT "TUTTI_TIMEOUT_MS=30000" SKIP_RETURN_CODE 77)
  endforeach()
  set_tests_properties(thread_comm_n3 PROPERTIES TIMEOUT 180)
  set_tests_properties(thread_comm_n2_tcp PROPERTIES TIMEOUT 180
                       ENVIRONMENT "TUTTI_TIMEOUT_MS=30000;NCCL_SHM_DISABLE=1")
  set_tests_properties(thread_comm_abort_n2 PROPERTIES TIMEOUT 60)
endif()
