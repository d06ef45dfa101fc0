# The UCX transport (src/transport/ucx.c, ucx_setup.c; docs/ucx.md) under the public API: the correctness
# matrix, AlltoAll and Send/Recv, and a killed rank, with NCCL_NET=UCX between ranks that sit on
# different "hosts" (NCCL_HOSTID per rank, so Tutti's shared memory serves only ranks of one
# host), through UCX's TCP (UCX_TLS=tcp) and shared-memory (UCX_TLS=sm) transports; and two
# network namespaces joined by a veth pair when run as root (tests/ucx/netns.sh). Labels ucx and
# transport; every test exits 77 (skipped) in a build without UCX. The transport-level
# scenarios over UCX are test_transport_ucx_* (tests/transport.cmake). The dtypes and counts are
# trimmed so that the label takes a few minutes on 2 busy cores (about 8.5 minutes at load 30,
# before the trim).
if(TARGET tutti-run AND TARGET coll_matrix AND TARGET tutti-perf)
  set(ucx_run ${CMAKE_SOURCE_DIR}/tests/ucx/run.sh ${CMAKE_BINARY_DIR})
  # tutti_ucx_test(NAME TLS NRANKS RANKS_PER_HOST [CHUNK bytes] ARGS program args...)
  function(tutti_ucx_test name tls nranks per_host)
    cmake_parse_arguments(T "" "CHUNK" "ARGS" ${ARGN})
    set(env "UCX_TLS=${tls}" "TUTTI_TIMEOUT_MS=60000" "UCX_RUN_TIMEOUT=280")
    if(T_CHUNK)
      list(APPEND env "TUTTI_CHUNK_BYTES=${T_CHUNK}")
    endif()
    add_test(NAME ${name} COMMAND ${ucx_run} ${nranks} ${per_host} ${T_ARGS})
    set_tests_properties(${name} PROPERTIES LABELS "ucx;transport" TIMEOUT 300 PROCESSORS 2
                         ENVIRONMENT "${env}" SKIP_RETURN_CODE 77)
  endfunction()

  set(matrix $<TARGET_FILE:coll_matrix>)
  # Every collective, op and in-place form at small counts through slots of 256 bytes, so that
  # a message crosses many frames and wraps the ring.
  tutti_ucx_test(ucx_coll_n2_tcp tcp 2 1 CHUNK 256 ARGS ${matrix}
                 --counts 0,1,7,chunk-1,chunk,chunk+1,4099 --dtypes float32,bfloat16,int8,int64)
  tutti_ucx_test(ucx_coll_n3_sm sm 3 1 CHUNK 256 ARGS ${matrix}
                 --counts 0,1,chunk+1,4099 --dtypes float32,int64)
  # Two hosts of two ranks: shared memory within each, UCX between them.
  tutti_ucx_test(ucx_coll_n4_tcp_2x2 tcp 4 2 CHUNK 256 ARGS ${matrix}
                 --counts 0,1,chunk+1,4099 --dtypes float32,int8)
  # Default slots (512 KiB frames: UCX's rendezvous protocol) and a few MiB.
  tutti_ucx_test(ucx_coll_n3_tcp_big tcp 3 1 ARGS ${matrix}
                 --counts chunk+1,big --dtypes float32,bfloat16 --ops sum)
  # Point-to-point connections: AlltoAll and Send/Recv with tutti-perf's own check.
  foreach(coll alltoall sendrecv)
    tutti_ucx_test(ucx_perf_${coll}_n3_tcp tcp 3 1 ARGS $<TARGET_FILE:tutti-perf>
                   -t ${coll} -b 8 -e 1M -f 32 -d float -n 2 -w 1 -c 1)
  endforeach()
endif()

# A rank killed with SIGKILL mid-collective over UCX's TCP: every survivor errs within 1 s,
# naming it (tests/fault_kill.c). UCX cannot see a dead peer over its shared-memory transports;
# there the communicator's deadline does (docs/ucx.md).
if(TARGET fault_kill)
  add_test(NAME fault_kill_ucx COMMAND ${CMAKE_SOURCE_DIR}/tests/ucx/if_built.sh
                                       ${CMAKE_BINARY_DIR} $<TARGET_FILE:fault_kill>
                                       --trials 10 --seed 4)
  set_tests_properties(fault_kill_ucx PROPERTIES LABELS "ucx;transport;fault" TIMEOUT 300
                       SKIP_RETURN_CODE 77 ENVIRONMENT "NCCL_NET=UCX;UCX_TLS=tcp;NCCL_SHM_DISABLE=1")
endif()

# A point-to-point sender stalled on a receiver whose communicator failed learns it from the
# receiver's bye (tests/fault_deadline.c, case 5), not at its own deadline.
if(TARGET fault_deadline)
  add_test(NAME fault_deadline_ucx COMMAND ${CMAKE_SOURCE_DIR}/tests/ucx/if_built.sh
                                           ${CMAKE_BINARY_DIR} $<TARGET_FILE:fault_deadline>
                                           p2p-ucx)
  set_tests_properties(fault_deadline_ucx PROPERTIES LABELS "ucx;transport;fault" TIMEOUT 60
                       SKIP_RETURN_CODE 77 ENVIRONMENT "NCCL_NET=UCX;UCX_TLS=tcp")
endif()

# Two network namespaces joined by a veth pair (needs root; else skipped): one rank per host,
# then two (shared memory within each host, UCX between them), over UCX's TCP, and once over its
# shared memory, which the namespaces still share.
if(TARGET tutti-run AND TARGET coll_matrix)
  set(ucx_netns ${CMAKE_SOURCE_DIR}/tests/ucx/netns.sh ${CMAKE_BINARY_DIR})
  set(netns_args $<TARGET_FILE:coll_matrix> --counts 0,1,7,chunk+1,4099)
  add_test(NAME ucx_netns_tcp_2x1 COMMAND ${ucx_netns} tcp 1 ${netns_args}
           --dtypes float32,bfloat16,int8,int64)
  add_test(NAME ucx_netns_tcp_2x2 COMMAND ${ucx_netns} tcp 2 ${netns_args} --dtypes float32)
  add_test(NAME ucx_netns_sm_2x1 COMMAND ${ucx_netns} sm 1 ${netns_args} --dtypes float32,int64)
  set_tests_properties(ucx_netns_tcp_2x1 ucx_netns_tcp_2x2 ucx_netns_sm_2x1 PROPERTIES
                       LABELS "ucx;transport" TIMEOUT 300 PROCESSORS 2 SKIP_RETURN_CODE 77
                       ENVIRONMENT "TUTTI_TIMEOUT_MS=60000;TUTTI_CHUNK_BYTES=256;UCX_RUN_TIMEOUT=280")
endif()

# Communicators over UCX made and aborted (or destroyed) again and again leave no file
# descriptor and no thread behind (tests/ucx_leak.c).
add_executable(ucx_leak tests/ucx_leak.c)
target_link_libraries(ucx_leak PRIVATE tutti)
target_compile_options(ucx_leak PRIVATE ${TUTTI_WARNINGS})
add_test(NAME ucx_leak COMMAND ucx_leak 6)
set_tests_properties(ucx_leak PROPERTIES LABELS "ucx;transport;fault" TIMEOUT 200
                     SKIP_RETURN_CODE 77 PROCESSORS 2 ENVIRONMENT "UCX_TLS=tcp;TUTTI_TIMEOUT_MS=60000")
