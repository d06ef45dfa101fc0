# The multi-host tests (label hosts): jobs on a test bed of network namespaces, each a "host"
# with its own address and hostname (tests/hosts/bed.sh, docs/hosts.md). They need root and
# are skipped (77) without it; CI runs as root. tests/hosts/cases.sh holds each case.
#
# The correctness matrix across hosts: every collective (the five reducing or gathering ones,
# AlltoAll, Gather, Scatter, SendRecv) at 2 hosts x 1 rank, 4 x 1, 2 x 2 and 3 x 2, over TCP
# (and, in one more test, UCX) between hosts and shared memory within, checked bit for bit; 4 KiB slots make the counts
# cross several chunks. The dtypes and ops are trimmed (the full dtype x op matrix is the coll
# label's, and the transports do not look at either) so that the four stay well under a minute
# on 2 cores.
set(TT_HOSTS ${CMAKE_SOURCE_DIR}/tests/hosts/cases.sh ${CMAKE_BINARY_DIR})
# The bed's userspace switch with impaired links, for kernels without netem (tests/hosts/wire.c).
add_executable(tt_wire ${CMAKE_SOURCE_DIR}/tests/hosts/wire.c)
target_compile_options(tt_wire PRIVATE ${TUTTI_WARNINGS})
if(TARGET tutti-run)
  function(tutti_hosts_test name)
    cmake_parse_arguments(T "" "TIMEOUT" "ENV;ARGS" ${ARGN})
    add_test(NAME hosts_${name} COMMAND bash ${TT_HOSTS} ${T_ARGS})
    set_tests_properties(hosts_${name} PROPERTIES LABELS hosts TIMEOUT ${T_TIMEOUT}
                         SKIP_RETURN_CODE 77 PROCESSORS 2
                         ENVIRONMENT "TUTTI_TIMEOUT_MS=60000;TT_JOB_TIMEOUT=100;${T_ENV}")
  endfunction()

  set(matrix_args --colls every --counts 0,7,chunk+1,4099)
  tutti_hosts_test(matrix_2x1 TIMEOUT 120 ENV TUTTI_CHUNK_BYTES=4096
                   ARGS matrix 2 1 ${matrix_args} --dtypes int8,bfloat16,float32,float64)
  # Roots 1, 3 and 5 (those that exist): never rank 0, and on every host of 2 x 2 and 3 x 2.
  tutti_hosts_test(matrix_4x1 TIMEOUT 120 ENV TUTTI_CHUNK_BYTES=4096
                   ARGS matrix 4 1 ${matrix_args} --dtypes float32 --ops sum,min,avg
                   --roots 1,3,5)
  tutti_hosts_test(matrix_2x2 TIMEOUT 120 ENV TUTTI_CHUNK_BYTES=4096
                   ARGS matrix 2 2 ${matrix_args} --dtypes bfloat16,float32 --ops sum,min,avg
                   --roots 1,3,5)
  tutti_hosts_test(matrix_3x2 TIMEOUT 120 ENV TUTTI_CHUNK_BYTES=4096
                   ARGS matrix 3 2 ${matrix_args} --dtypes float32 --ops sum,min,avg
                   --roots 1,3,5)

  # The same four over the UCX transport (TUTTI_NET=ucx, through UCX's TCP between the hosts):
  # one bed of 4 hosts runs the four jobs in turn, which saves three beds' setup (7-22 s in all
  # on 2 busy cores, load 5-15). One dtype: the transports never look at it, and the TCP tests
  # above cover more. Skipped (77) in a build without UCX.
  tutti_hosts_test(matrix_ucx TIMEOUT 200 ENV TUTTI_CHUNK_BYTES=4096
                   ARGS matrices ucx 2x1,4x1,2x2,3x2 ${matrix_args}
                   --dtypes float32 --ops sum,min,avg --roots 1,3,5)
  set_tests_properties(hosts_matrix_ucx PROPERTIES LABELS "hosts;ucx")

  # Host identity and NCCL_HOSTID; the launchers (tutti-run, Open MPI's mpirun through the
  # bed's ssh stand-in, srun's variables) running examples/; NCCL_SOCKET_IFNAME with two
  # networks; TUTTI_PORT_RANGE.
  foreach(case hostid examples mpirun slurm ifname portrange)
    set(env)
    # Under ASan, Open MPI's own allocations, never freed, are not ours to report (LeakSanitizer
    # found 121 KB in 3,339 of them per rank, none with a frame in libtutti).
    if(case STREQUAL "mpirun" AND TUTTI_SANITIZE)
      set(env ENV ASAN_OPTIONS=detect_leaks=0)
    endif()
    tutti_hosts_test(${case} TIMEOUT 120 ${env} ARGS ${case})
  endforeach()
endif()

# Impaired links: 20 ms one way and 1% packet loss on every host's link (tc netem, or tt_wire
# where the kernel has no netem). The acceptance run, 200 mixed collectives (every collective,
# 4 B to 4 MB) at 2 hosts x 2 ranks, takes about a minute and is a soak test; the default suite
# runs a short one at 2 hosts x 1 rank.
if(TARGET tutti-run)
  tutti_hosts_test(netem_short TIMEOUT 120
                   ARGS netem 2 1 40 0 --colls every --dtypes float32 --ops sum --counts 7,65536)
  tutti_hosts_test(netem_200 TIMEOUT 400 ENV TT_JOB_TIMEOUT=380
                   ARGS netem 2 2 200 1 --colls every --dtypes float32 --ops sum
                   --counts 1,7,4099,65536,1000000)
  set_tests_properties(hosts_netem_200 PROPERTIES LABELS "hosts;soak")
endif()
