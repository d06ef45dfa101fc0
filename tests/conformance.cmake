# API conformance (label api) and the point-to-point stress test (label coll), each run as every
# rank under tutti-run: api_conformance at 4 ranks over shared memory, at 4 over TCP
# (NCCL_SHM_DISABLE=1) and at 3; stream_overlap at 4, and its error case at 3; p2p_stress at
# 8 ranks, 1000 groups, over shared memory and over TCP, at 5 ranks with 256-byte slots so that
# most messages cross many chunks, and at 4 ranks with messages up to 8 MiB, twice
# NCCL_BUFFSIZE's default.
# TUTTI_TIMEOUT_MS makes a hang fail on the library's own deadline before tutti-run's --timeout,
# which comes before CTest's.
if(TARGET tutti-run)
  foreach(t api_conformance p2p_stress stream_overlap events alltoallv p2p_first_contact)
    add_executable(${t} ${CMAKE_SOURCE_DIR}/tests/${t}.c)
    target_compile_options(${t} PRIVATE ${TUTTI_WARNINGS})
    target_link_libraries(${t} PRIVATE tutti m)
  endforeach()
  # api_conformance's tests are spread over three files that share one set of helpers.
  add_executable(collv ${CMAKE_SOURCE_DIR}/tests/collv.c ${CMAKE_SOURCE_DIR}/tests/harness.c)
  target_compile_options(collv PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(collv PRIVATE tutti m)
  target_sources(api_conformance PRIVATE ${CMAKE_SOURCE_DIR}/tests/api_conformance_colls.c
                                         ${CMAKE_SOURCE_DIR}/tests/api_conformance_groups.c
                                         ${CMAKE_SOURCE_DIR}/tests/api_conformance_common.c)

  # tutti_conformance_test(NAME RANKS TIMEOUT LABEL ENV PROGRAM ARGS...)
  function(tutti_conformance_test name nranks timeout label env program)
    math(EXPR run_timeout "${timeout} - 10")
    add_test(NAME ${name}
             COMMAND $<TARGET_FILE:tutti-run> -n ${nranks} --timeout ${run_timeout}
                     $<TARGET_FILE:${program}> ${ARGN})
    set_tests_properties(${name} PROPERTIES LABELS ${label} TIMEOUT ${timeout} PROCESSORS 2
                         ENVIRONMENT "${env}" SKIP_RETURN_CODE 77)
  endfunction()

  set(env "TUTTI_TIMEOUT_MS=30000")
  tutti_conformance_test(api_conformance_n4 4 120 api "${env}" api_conformance)
  tutti_conformance_test(api_conformance_n4_tcp 4 120 api "${env};NCCL_SHM_DISABLE=1"
                         api_conformance)
  tutti_conformance_test(api_conformance_n3 3 120 api "${env}" api_conformance)
  # Four ranks on two hosts made with NCCL_HOSTID (shared memory within, TCP across), where the
  # cost model takes Tree for small AllReduce, Broadcast and Reduce.
  add_test(NAME api_conformance_n4_hosts2
           COMMAND $<TARGET_FILE:tutti-run> -n 4 --timeout 110 sh -c
                   "NCCL_HOSTID=host$((RANK / 2)) exec $<TARGET_FILE:api_conformance>")
  set_tests_properties(api_conformance_n4_hosts2 PROPERTIES LABELS api TIMEOUT 120 PROCESSORS 2
                       ENVIRONMENT "${env}" SKIP_RETURN_CODE 77)
  tutti_conformance_test(stream_overlap_n4 4 120 api "${env}" stream_overlap)
  # A peer's abort may surface only as the deadline, so this one runs with a short deadline.
  tutti_conformance_test(stream_errors_n3 3 60 api "TUTTI_TIMEOUT_MS=3000" stream_overlap errors)
  # Per-operation events: over shared memory at 3 ranks, over TCP at 2, and an operation that
  # fails on its deadline.
  tutti_conformance_test(events_n3 3 60 api "${env}" events)
  # tuttiAlltoAllV: at 2, 3 and 4 ranks over shared memory and at 3 over TCP.
  foreach(n 2 3 4)
    tutti_conformance_test(alltoallv_n${n} ${n} 60 api "${env}" alltoallv)
  endforeach()
  tutti_conformance_test(alltoallv_n3_tcp 3 60 api "${env};NCCL_SHM_DISABLE=1" alltoallv)
  # tuttiAllGatherV and tuttiReduceScatterV: the same, and ranks that disagree on a count.
  foreach(n 2 3 4)
    tutti_conformance_test(collv_n${n} ${n} 90 api "${env}" collv)
  endforeach()
  tutti_conformance_test(collv_n3_tcp 3 90 api "${env};NCCL_SHM_DISABLE=1" collv)
  tutti_conformance_test(collv_mismatch_n3 3 60 api "TUTTI_TIMEOUT_MS=5000" collv mismatch)
  tutti_conformance_test(events_n2_tcp 2 60 api "${env};NCCL_SHM_DISABLE=1" events)
  tutti_conformance_test(events_errors_n2 2 60 api "TUTTI_TIMEOUT_MS=2000" events errors)
  # Ranks started through a shell, which keeps a copy of rank 0's inherited root socket
  # (TUTTI_ROOT_FD) while the program makes one communicator after another from NCCL_COMM_ID:
  # the first root must stop that copy listening too, or the second cannot bind its port.
  add_test(NAME events_wrapped_n3
           COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 50 sh -c
                   "$<TARGET_FILE:events> stream nonblocking; exit $?")
  set_tests_properties(events_wrapped_n3 PROPERTIES LABELS api TIMEOUT 60 PROCESSORS 2
                       ENVIRONMENT "TUTTI_TIMEOUT_MS=10000")
  # Host streams and events drive batches from several threads: make tsan runs them too.
  set_tests_properties(stream_overlap_n4 events_n3 PROPERTIES LABELS "api;thread")
  tutti_conformance_test(p2p_stress_n8 8 240 coll "${env}" p2p_stress --groups 1000)
  tutti_conformance_test(p2p_stress_n8_tcp 8 240 coll "${env};NCCL_SHM_DISABLE=1" p2p_stress
                         --groups 1000 --seed 2)
  tutti_conformance_test(p2p_stress_n5_chunk256 5 240 coll "${env};TUTTI_CHUNK_BYTES=256"
                         p2p_stress --groups 1000 --seed 3 --prob 0.4)
  tutti_conformance_test(p2p_stress_n4_big 4 240 coll "${env}" p2p_stress --groups 200 --seed 4
                         --max-bytes 8388608)
  # Ungrouped Send before Recv on both ranks of a pair at first contact: over shared memory at
  # 2 and 3 ranks (one left alone), over TCP at 4; a hang fails on the short deadline.
  tutti_conformance_test(p2p_first_contact_n2 2 60 coll "TUTTI_TIMEOUT_MS=10000"
                         p2p_first_contact)
  tutti_conformance_test(p2p_first_contact_n3 3 60 coll "TUTTI_TIMEOUT_MS=10000"
                         p2p_first_contact)
  tutti_conformance_test(p2p_first_contact_n4_tcp 4 60 coll
                         "TUTTI_TIMEOUT_MS=10000;NCCL_SHM_DISABLE=1" p2p_first_contact)
endif()
