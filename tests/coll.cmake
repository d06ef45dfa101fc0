# The collective correctness matrix (label coll): coll_matrix runs as every rank under tutti-run
# and checks every element bit for bit (tests/coll_matrix.c). The entries below span ranks
# {1,2,3,4,5,8} x transport {shm, tcp}; every dtype x op runs at 2, 3 and 4 ranks on both
# transports. TUTTI_CHUNK_BYTES shrinks the slots so that small counts cross many chunks and wrap
# the FIFO; the big counts (a few MiB) run with the default slots only, trimmed to a few dtypes
# and ops at 5 and 8 ranks, so that the whole label stays within about 6 minutes on 2 cores.
add_executable(coll_matrix ${CMAKE_SOURCE_DIR}/tests/coll_matrix.c
                           ${CMAKE_SOURCE_DIR}/tests/harness.c)
target_include_directories(coll_matrix PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_compile_options(coll_matrix PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(coll_matrix PRIVATE tutti m)

if(TARGET tutti-run)
  # tutti_coll_test(NAME RANKS shm|tcp TIMEOUT seconds [CHUNK bytes] [ENV VAR=value...]
  #                 ARGS coll_matrix-args...); ENV selects, for example, an algorithm (NCCL_ALGO).
  function(tutti_coll_test name nranks transport)
    cmake_parse_arguments(T "" "TIMEOUT;CHUNK" "ENV;ARGS" ${ARGN})
    # An operation that hangs fails on its own deadline, well before CTest's timeout.
    set(env "TUTTI_TIMEOUT_MS=60000" ${T_ENV})
    if(transport STREQUAL "tcp")
      list(APPEND env "NCCL_SHM_DISABLE=1")
    endif()
    if(T_CHUNK)
      list(APPEND env "TUTTI_CHUNK_BYTES=${T_CHUNK}")
    endif()
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * ${TUTTI_TEST_TIME_SCALE}")
    math(EXPR run_timeout "${T_TIMEOUT} - 10")
    add_test(NAME ${name}
             COMMAND $<TARGET_FILE:tutti-run> -n ${nranks} --timeout ${run_timeout}
                     $<TARGET_FILE:coll_matrix> ${T_ARGS})
    set(procs 1)
    if(nranks GREATER 1)
      set(procs 2)
    endif()
    set_tests_properties(${name} PROPERTIES LABELS coll TIMEOUT ${T_TIMEOUT}
                         ENVIRONMENT "${env}" PROCESSORS ${procs} SKIP_RETURN_CODE 77)
  endfunction()

  set(small_counts --counts 0,1,7,chunk-1,chunk,chunk+1,4099 --iters 2)
  set(tiny_counts --counts 0,1,7,chunk-1,chunk,chunk+1,257)
  set(big_counts --counts chunk-1,chunk,chunk+1,big)

  # Every dtype x op x collective x root x in-place form, small and medium counts, 256-byte slots.
  foreach(n 1 2 3 4 5 8)
    foreach(tr shm tcp)
      if(n EQUAL 1 AND tr STREQUAL "tcp")
        continue() # one rank has no peer: no transport to choose
      endif()
      tutti_coll_test(coll_n${n}_${tr} ${n} ${tr} TIMEOUT 180 CHUNK 256 ARGS ${small_counts})
    endforeach()
  endforeach()

  # Tiny slots: 64 bytes; 24 (3 elements of the widest dtype); 36, which cuts 8-byte elements
  # across slots; and 8, one widest element per slot.
  tutti_coll_test(coll_n3_shm_chunk64 3 shm TIMEOUT 120 CHUNK 64 ARGS ${tiny_counts})
  tutti_coll_test(coll_n4_tcp_chunk64 4 tcp TIMEOUT 120 CHUNK 64 ARGS ${tiny_counts})
  tutti_coll_test(coll_n4_shm_chunk24 4 shm TIMEOUT 120 CHUNK 24 ARGS ${tiny_counts})
  tutti_coll_test(coll_n3_tcp_chunk24 3 tcp TIMEOUT 120 CHUNK 24 ARGS ${tiny_counts})
  tutti_coll_test(coll_n8_shm_chunk24 8 shm TIMEOUT 120 CHUNK 24 ARGS ${tiny_counts})
  tutti_coll_test(coll_n5_shm_chunk36 5 shm TIMEOUT 120 CHUNK 36 ARGS ${tiny_counts})
  tutti_coll_test(coll_n4_tcp_chunk36 4 tcp TIMEOUT 120 CHUNK 36 ARGS ${tiny_counts})
  tutti_coll_test(coll_n3_shm_chunk8 3 shm TIMEOUT 120 CHUNK 8 ARGS --counts 1,7,8,9,65)

  # Default slots, counts around one slot and a few MiB: every dtype and op at 2-4 ranks, a
  # trimmed set at 1, 5 and 8.
  tutti_coll_test(coll_n1_shm_big 1 shm TIMEOUT 180 ARGS ${big_counts} --ops sum,avg)
  foreach(tr shm tcp)
    foreach(n 2 3)
      tutti_coll_test(coll_n${n}_${tr}_big ${n} ${tr} TIMEOUT 300 ARGS ${big_counts})
    endforeach()
    tutti_coll_test(coll_n4_${tr}_big 4 ${tr} TIMEOUT 300 ARGS --counts chunk+1,big)
    tutti_coll_test(coll_n5_${tr}_big 5 ${tr} TIMEOUT 300
                    ARGS --counts big --dtypes int8,bfloat16,float32 --ops sum,avg --roots few)
    tutti_coll_test(coll_n8_${tr}_big 8 ${tr} TIMEOUT 300
                    ARGS --counts big --dtypes bfloat16,float32 --ops sum,avg)
  endforeach()
endif()

# tutti-perf's own check (-c 1) over every collective, dtype and op at a few sizes: it must find
# no wrong element, and it keeps the benchmark's command line working.
if(TARGET tutti-run AND TARGET tutti-perf)
  foreach(coll all_reduce all_gather reduce_scatter broadcast reduce)
    add_test(NAME perf_check_${coll}
             COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 110 $<TARGET_FILE:tutti-perf>
                     -t ${coll} -b 8 -e 1M -f 16 -d all -o all -r 1 -n 2 -w 1 -c 1)
    set_tests_properties(perf_check_${coll} PROPERTIES LABELS perf TIMEOUT 120
                         ENVIRONMENT "TUTTI_TIMEOUT_MS=60000" PROCESSORS 2)
  endforeach()
  # The movement-only collectives (no op), at a root other than 0 where there is one; AlltoAll
  # once more at 4 ranks over TCP alone.
  foreach(coll alltoall gather scatter sendrecv)
    add_test(NAME perf_check_${coll}
             COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 110 $<TARGET_FILE:tutti-perf>
                     -t ${coll} -b 8 -e 1M -f 16 -d all -r 1 -n 2 -w 1 -c 1)
    set_tests_properties(perf_check_${coll} PROPERTIES LABELS perf TIMEOUT 120
                         ENVIRONMENT "TUTTI_TIMEOUT_MS=60000" PROCESSORS 2)
  endforeach()
  # Direct forced over ordinary buffers registered with ncclCommRegister (-R 1), whose pages the
  # registration moves into memory files: peers map each other's buffers and read them with
  # plain loads instead of cross-memory attach.
  foreach(coll all_reduce all_gather reduce_scatter broadcast reduce alltoall)
    add_test(NAME perf_check_mapped_${coll}
             COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 110 $<TARGET_FILE:tutti-perf>
                     -t ${coll} -b 8 -e 1M -f 64 -d all -o all -r 2 -n 2 -w 1 -c 1 -R 1)
    set_tests_properties(perf_check_mapped_${coll} PROPERTIES LABELS perf TIMEOUT 120
                         ENVIRONMENT "TUTTI_TIMEOUT_MS=60000;NCCL_ALGO=Direct" PROCESSORS 2)
  endforeach()
  # Symmetric windows (-R 2) under the cost model's own choice: OneShot for the smallest sizes,
  # Direct over mapped buffers from a few KiB (AlltoAll from its smallest blocks).
  foreach(coll all_reduce all_gather reduce_scatter broadcast alltoall)
    add_test(NAME perf_check_sym_${coll}
             COMMAND $<TARGET_FILE:tutti-run> -n 4 --timeout 110 $<TARGET_FILE:tutti-perf>
                     -t ${coll} -b 8 -e 1M -f 8 -d all -o all -r 3 -n 2 -w 1 -c 1 -R 2)
    set_tests_properties(perf_check_sym_${coll} PROPERTIES LABELS perf TIMEOUT 120
                         ENVIRONMENT "TUTTI_TIMEOUT_MS=60000" PROCESSORS 2)
  endforeach()
  # The same over ordinary buffers registered as symmetric windows (-R 2 --malloc): their pages
  # move into memory files, the ranks agree at registration that every window is shareable, and
  # the cost model counts on the mapping as for ncclMemAlloc memory.
  foreach(coll all_reduce all_gather reduce_scatter broadcast alltoall)
    add_test(NAME perf_check_symmalloc_${coll}
             COMMAND $<TARGET_FILE:tutti-run> -n 3 --timeout 110 $<TARGET_FILE:tutti-perf>
                     -t ${coll} -b 8 -e 1M -f 8 -d all -o all -r 2 -n 2 -w 1 -c 1 -R 2 --malloc)
    set_tests_properties(perf_check_symmalloc_${coll} PROPERTIES LABELS perf TIMEOUT 120
                         ENVIRONMENT "TUTTI_TIMEOUT_MS=60000" PROCESSORS 2)
  endforeach()
  # 18 ranks with separate send and receive blocks: one AllReduce maps 34 peer blocks, more
  # than the smallest mapping cache; none of them may be evicted while the operation uses it.
  add_test(NAME perf_check_sym_n18_all_reduce
           COMMAND $<TARGET_FILE:tutti-run> -n 18 --timeout 110 $<TARGET_FILE:tutti-perf>
                   -t all_reduce -b 64K -e 256K -f 4 -n 2 -w 1 -c 1 -R 2)
  set_tests_properties(perf_check_sym_n18_all_reduce PROPERTIES LABELS perf TIMEOUT 120
                       ENVIRONMENT "TUTTI_TIMEOUT_MS=60000;NCCL_ALGO=Direct" PROCESSORS 2)
  # Mailbox slots too small for Direct's published addresses: Direct must stay off (said at
  # INFO), and every size must still be right.
  add_test(NAME perf_check_tiny_mailbox
           COMMAND sh -c "out=$($<TARGET_FILE:tutti-run> -n 3 --timeout 100 \
                          $<TARGET_FILE:tutti-perf> -t all_reduce -b 8 -e 1M -f 8 -n 2 -w 1 -c 1 \
                          2>&1) || { echo \"$out\"; exit 1; }; echo \"$out\" | tail -3; \
                          echo \"$out\" | grep -q 'Direct off' && \
                          echo \"$out\" | grep -q 'Out of bounds values : 0 OK'")
  set_tests_properties(perf_check_tiny_mailbox PROPERTIES LABELS perf TIMEOUT 120 PROCESSORS 2
                       ENVIRONMENT "TUTTI_TIMEOUT_MS=60000;TUTTI_ONESHOT_BYTES=16;NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=INIT")
  add_test(NAME perf_check_alltoall_n4_tcp
           COMMAND $<TARGET_FILE:tutti-run> -n 4 --timeout 110 $<TARGET_FILE:tutti-perf>
                   -t alltoall -b 8 -e 1M -f 16 -d all -n 2 -w 1 -c 1)
  set_tests_properties(perf_check_alltoall_n4_tcp PROPERTIES LABELS perf TIMEOUT 120
                       ENVIRONMENT "TUTTI_TIMEOUT_MS=60000;NCCL_SHM_DISABLE=1" PROCESSORS 2)
endif()

# Every algorithm forced in turn (the cost model otherwise mixes them by size): the matrix must
# pass whichever one runs. OneShot takes counts that fit its mailbox, Tree up to half a FIFO
# (larger counts fall back to the ring); Direct and Ring all sizes.
if(TARGET tutti-run)
  foreach(algo Ring OneShot Direct Tree)
    string(TOLOWER ${algo} lower)
    set(counts --counts 0,1,7,chunk-1,chunk,chunk+1,4099)
    if(algo STREQUAL "Ring" OR algo STREQUAL "Direct")
      set(counts --counts 0,1,7,4099,big --big 600000)
    endif()
    tutti_coll_test(coll_n3_shm_${lower} 3 shm TIMEOUT 240 ENV NCCL_ALGO=${algo} ARGS ${counts})
    tutti_coll_test(coll_n2_shm_${lower} 2 shm TIMEOUT 240 ENV NCCL_ALGO=${algo}
                    ARGS ${counts} --dtypes float32,bfloat16,int8,int64,fp8e4m3)
  endforeach()
endif()

# Direct over ncclMemAlloc buffers: mapped by every peer (shared: AllReduce pushes its block into
# the peers' outputs, Broadcast and AllGather fan out), and on even ranks only (mixed: every rank
# meets mapped and copied peers, pushers and pullers in one AllReduce).
if(TARGET tutti-run)
  set(counts --counts 0,1,7,4099,big --big 600000)
  tutti_coll_test(coll_n2_shm_direct_mem 2 shm TIMEOUT 240 ENV NCCL_ALGO=Direct
                  ARGS ${counts} --mem shared --dtypes float32,bfloat16,int8,int64,fp8e4m3)
  tutti_coll_test(coll_n3_shm_direct_mem 3 shm TIMEOUT 240 ENV NCCL_ALGO=Direct
                  ARGS ${counts} --mem shared)
  tutti_coll_test(coll_n4_shm_direct_mixed 4 shm TIMEOUT 240 ENV NCCL_ALGO=Direct
                  ARGS ${counts} --mem mixed --dtypes float32,float16,uint8,float64)
  # Ordinary buffers registered with ncclCommRegister: peers map their whole pages and reach the
  # partial pages at either end, which sit differently on every rank, with cross-memory attach.
  # The log must show peers mapping the registration files, or the test would pass over
  # cross-memory attach alone.
  add_test(NAME coll_n3_shm_direct_registered
           COMMAND sh -c "\"$0\" -n 3 --timeout 230 \"$1\" $2 > \"$3\" 2>&1; rc=$?; cat \"$3\"; \
                          [ $rc -eq 0 ] && grep -q \"mapped rank [0-9]*'s memory file\" \"$3\""
                   $<TARGET_FILE:tutti-run> $<TARGET_FILE:coll_matrix>
                   "--counts 0,1,7,4099,big --big 600000 --mem registered --dtypes float32,bfloat16,int8,float64"
                   ${CMAKE_CURRENT_BINARY_DIR}/coll_n3_shm_direct_registered.log)
  set_tests_properties(coll_n3_shm_direct_registered PROPERTIES LABELS coll TIMEOUT 240
                       PROCESSORS 2 ENVIRONMENT
                       "TUTTI_TIMEOUT_MS=60000;NCCL_ALGO=Direct;NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=SHM")
  # Every copy streamed (non-temporal stores), which by default only buffers far beyond the L3
  # get: the pushes of AllReduce's fold to further outputs, the fan-out pieces, the block copies.
  tutti_coll_test(coll_n3_shm_direct_mem_stream 3 shm TIMEOUT 240 ENV NCCL_ALGO=Direct
                  TUTTI_STREAM_FOOTPRINT=1 ARGS ${counts} --mem mixed
                  --dtypes float32,bfloat16,int8,float64)
  # Shareable outputs that nobody maps: Broadcast and AllGather still fan out, writing the
  # peers' outputs with cross-memory attach.
  tutti_coll_test(coll_n3_shm_direct_nomap 3 shm TIMEOUT 240 ENV NCCL_ALGO=Direct
                  TUTTI_MAP_PEERS=0 ARGS ${counts} --mem shared --dtypes float32,int8,bfloat16)
endif()

# Tree (recursive doubling, binomial trees) where it is meant to run: across hosts. Five ranks
# over TCP alone (not a power of two: two ranks fold in first and get the result last), and
# six ranks on three hosts made with NCCL_HOSTID (two per host: shared memory within, TCP
# across), under the cost model's own choice, which takes Tree for the small counts there.
if(TARGET tutti-run)
  set(tree_counts --counts 0,1,7,chunk-1,chunk,chunk+1,4099 --colls allreduce,broadcast,reduce)
  tutti_coll_test(coll_n5_tcp_tree 5 tcp TIMEOUT 240 ENV NCCL_ALGO=Tree ARGS ${tree_counts})
  string(REPLACE ";" " " tree_args "${tree_counts}")
  # The test passes when every rank's matrix passes and the log shows Tree chosen.
  add_test(NAME coll_n6_hosts3_tree
           COMMAND sh -c "out=$($<TARGET_FILE:tutti-run> -n 6 --timeout 230 sh -c \
                          'NCCL_HOSTID=host$((RANK / 2)) exec $<TARGET_FILE:coll_matrix> \
                          ${tree_args} --dtypes float32,bfloat16,int8,uint64,float64 \
                          --roots few' 2>&1) || { echo \"$out\" | grep -v 'NCCL INFO'; exit 1; }; \
                          echo \"$out\" | grep -v 'NCCL INFO' | tail -6; \
                          echo \"$out\" | grep -q 'algo Tree'")
  set_tests_properties(coll_n6_hosts3_tree PROPERTIES LABELS coll TIMEOUT 240 PROCESSORS 2
                       ENVIRONMENT "TUTTI_TIMEOUT_MS=60000;NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=COLL")
endif()

# Hier (hierarchical AllReduce) on "hosts" made with NCCL_HOSTID on loopback: shared memory within
# a host, TCP across. Two hosts of two ranks with 256-byte slots (many loops, every phase), and
# three hosts of two ranks placed round robin (rank r on host r % 3, so local and rail
# neighbours are not rank neighbours) with the default slots and a count of a few MiB (the
# network slicing, several loops). Each passes when every rank's matrix passes and the log shows
# Hier chosen.
if(TARGET tutti-run)
  function(tutti_hier_test name nranks place timeout)
    string(REPLACE ";" " " args "${ARGN}")
    add_test(NAME ${name}
             COMMAND sh -c "out=$($<TARGET_FILE:tutti-run> -n ${nranks} --timeout ${timeout} sh -c \
                            'NCCL_HOSTID=host$((${place})) exec $<TARGET_FILE:coll_matrix> \
                            --colls allreduce ${args}' 2>&1) || \
                            { echo \"$out\" | grep -v 'NCCL INFO'; exit 1; }; \
                            echo \"$out\" | grep -v 'NCCL INFO' | tail -4; \
                            echo \"$out\" | grep -q 'algo Hier'")
    math(EXPR ctest_timeout "${timeout} + 10")
    set_tests_properties(${name} PROPERTIES LABELS "coll;algo" TIMEOUT ${ctest_timeout}
                         PROCESSORS 2 ENVIRONMENT
                         "TUTTI_TIMEOUT_MS=60000;NCCL_ALGO=allreduce:Hier;NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=COLL;${HIER_ENV}")
  endfunction()
  set(HIER_ENV "TUTTI_CHUNK_BYTES=256")
  tutti_hier_test(coll_n4_hosts2_hier 4 "RANK / 2" 170
                  --counts 0,1,7,chunk-1,chunk,chunk+1,4099 --dtypes float32,bfloat16,int8,int64
                  --ops sum,avg,max)
  set(HIER_ENV "NCCL_NSOCKS_PERTHREAD=2")
  tutti_hier_test(coll_n6_hosts3_hier 6 "RANK % 3" 170
                  --counts 7,4099,big --big 3000000 --dtypes float32,int8 --ops sum,avg)
  # TCP with frames striped over three sockets per connection, tiny slots so that every socket
  # carries many frames and the ring of slots wraps.
  tutti_coll_test(coll_n3_tcp_nsocks3 3 tcp TIMEOUT 120 CHUNK 64
                  ENV NCCL_NSOCKS_PERTHREAD=3 ARGS ${tiny_counts} --dtypes float32,int8,float64)
endif()
