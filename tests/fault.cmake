# Failure handling through the public API: deadlines at init and in collectives.

# A failure test program: one source in tests/, linked with the library.
function(tutti_fault_program name)
  add_executable(${name} tests/${name}.c)
  target_link_libraries(${name} PRIVATE tutti Threads::Threads)
  target_compile_options(${name} PRIVATE ${TUTTI_WARNINGS})
endfunction()

tutti_fault_program(fault_deadline)
add_test(NAME fault_deadline COMMAND fault_deadline)
set_tests_properties(fault_deadline PROPERTIES LABELS fault TIMEOUT 60)

# A rank killed with SIGKILL mid-collective: every survivor errs within 1 s naming it, over shared
# memory and over TCP, with the default deadline. 20 trials in the default suite, 200 under the
# soak label.
tutti_fault_program(fault_kill)
add_test(NAME fault_kill_shm COMMAND fault_kill --trials 20 --seed 1)
add_test(NAME fault_kill_tcp COMMAND fault_kill --trials 20 --seed 2)
set_tests_properties(fault_kill_tcp PROPERTIES ENVIRONMENT "NCCL_SHM_DISABLE=1")
# Each rank on a host of its own (NCCL_HOSTID): no process to watch, only the dead rank's
# closed connections.
add_test(NAME fault_kill_apart COMMAND fault_kill --trials 12 --seed 3 --apart)
# Their bounds on how soon a survivor errs are wall-clock: they run with no other test.
set_tests_properties(fault_kill_shm fault_kill_tcp fault_kill_apart PROPERTIES LABELS fault
                     TIMEOUT 300 PROCESSORS 2)
add_test(NAME fault_kill_shm_soak COMMAND fault_kill --trials 200 --seed 11)
add_test(NAME fault_kill_tcp_soak COMMAND fault_kill --trials 200 --seed 12)
set_tests_properties(fault_kill_tcp_soak PROPERTIES ENVIRONMENT "NCCL_SHM_DISABLE=1")
set_tests_properties(fault_kill_shm_soak fault_kill_tcp_soak PROPERTIES LABELS soak TIMEOUT 3000)

# ncclCommAbort from another thread while a call is blocked (peer stopped, peer dead, mid-init):
# returns within 1 s, the blocked call errs, nothing crashes. 12 trials by default, 200 of each
# kind under soak (run it in the asan preset to see use after free).
tutti_fault_program(fault_abort)
add_test(NAME fault_abort COMMAND fault_abort --trials 12)
set_tests_properties(fault_abort PROPERTIES LABELS fault TIMEOUT 120 PROCESSORS 2)
add_test(NAME fault_abort_soak COMMAND fault_abort --trials 600)
set_tests_properties(fault_abort_soak PROPERTIES LABELS soak TIMEOUT 2400)
# init -> fault -> Abort cycles in one process leave its fds, threads and /dev/shm entries as
# they were: 15 cycles by default, 200 under soak.
add_test(NAME fault_abort_cycles COMMAND fault_abort --cycles 15)
set_tests_properties(fault_abort_cycles PROPERTIES LABELS fault TIMEOUT 120)
add_test(NAME fault_abort_cycles_soak COMMAND fault_abort --cycles 200)
set_tests_properties(fault_abort_cycles_soak PROPERTIES LABELS soak TIMEOUT 1200)

# Arguments that differ across ranks (count, datatype, operator, root, collective) at 8 B, 1 MiB
# and 64 MiB: ncclInvalidUsage on every rank, over shared memory and over TCP (NCCL_SHM_DISABLE=1)
# at 2 and 3 ranks. A few seconds each; 4 ranks under soak.
if(TARGET tutti-run)
  tutti_fault_program(fault_mismatch)
  foreach(cfg "n2_shm;2;fault;" "n3_shm;3;fault;" "n2_tcp;2;fault;NCCL_SHM_DISABLE=1"
              "n3_tcp;3;fault;NCCL_SHM_DISABLE=1" "n4_shm;4;soak;" "n4_tcp;4;soak;NCCL_SHM_DISABLE=1")
    list(GET cfg 0 name)
    list(GET cfg 1 n)
    list(GET cfg 2 label)
    list(GET cfg 3 extra)
    add_test(NAME fault_mismatch_${name}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 170 $<TARGET_FILE:fault_mismatch>)
    set_tests_properties(fault_mismatch_${name} PROPERTIES LABELS ${label} TIMEOUT 180
                         ENVIRONMENT "TUTTI_TIMEOUT_MS=20000;${extra}")
  endforeach()
endif()
# One exchange in two forms: ncclAlltoAll on some ranks, grouped ncclSend/ncclRecv to every peer
# on the others. Over TCP it completes with exact data; over shared memory, where the AlltoAll
# runs over the host team, every rank fails with ncclInvalidUsage within 10 s although
# TUTTI_TIMEOUT_MS is 120 s. Gather and Scatter against plain sends complete everywhere, and so
# does a lone Recv queued on a host stream across an AlltoAll (not the mix: no false alarm).
if(TARGET tutti-run)
  tutti_fault_program(fault_alltoall_p2p)
  foreach(cfg "n2_shm;2;" "n3_shm;3;" "n2_tcp;2;NCCL_SHM_DISABLE=1" "n3_tcp;3;NCCL_SHM_DISABLE=1")
    list(GET cfg 0 name)
    list(GET cfg 1 n)
    list(GET cfg 2 extra)
    add_test(NAME fault_alltoall_p2p_${name}
             COMMAND $<TARGET_FILE:tutti-run> -n ${n} --timeout 170
                     $<TARGET_FILE:fault_alltoall_p2p>)
    set_tests_properties(fault_alltoall_p2p_${name} PROPERTIES LABELS fault TIMEOUT 180
                         ENVIRONMENT "TUTTI_TIMEOUT_MS=120000;${extra}")
  endforeach()
endif()
# tuttiCommDump while a thread is blocked names the operation and the rank it waits for.
add_test(NAME fault_dump COMMAND fault_abort --trials 1)
set_tests_properties(fault_dump PROPERTIES LABELS fault TIMEOUT 60 PASS_REGULAR_EXPRESSION
  "1 operation stalled:.*#1 AllReduce of 1024 elements of float32, stalled [0-9.]+ ms, waiting for data from rank 1")
tutti_fault_program(fault_signal)
add_test(NAME fault_signal COMMAND fault_signal)
set_tests_properties(fault_signal PROPERTIES LABELS fault TIMEOUT 60 PASS_REGULAR_EXPRESSION
  "rank 0 of 2 \\(SIGUSR1\\): 1 operation stalled:.*#1 AllReduce of 4 elements of float32, stalled [0-9.]+ ms, waiting for data from rank 1"
  FAIL_REGULAR_EXPRESSION "handler was not called;0 operations stalled")

# TUTTI_FAULT: exit, stall, close and corrupt at a named point give each survivor the expected
# error naming the failing rank.
# A peer that dies during a point-to-point connection's setup, after posting its side and
# before attaching to the other's: the other fails within seconds, over shm and TCP, whether the
# dying rank was to send (the survivor's receive side waits), to receive (the survivor's send
# side attaches to it after it died: "late") or busy with a third rank ("elsewhere"); "apart":
# each rank on a host of its own, where only the peer's closed listeners tell.
tutti_fault_program(fault_connect)
add_test(NAME fault_connect COMMAND fault_connect)
add_test(NAME fault_connect_tcp COMMAND fault_connect)
add_test(NAME fault_connect_late COMMAND fault_connect late)
add_test(NAME fault_connect_late_tcp COMMAND fault_connect late)
add_test(NAME fault_connect_late_apart COMMAND fault_connect late apart)
add_test(NAME fault_connect_elsewhere COMMAND fault_connect elsewhere)
add_test(NAME fault_connect_elsewhere_apart COMMAND fault_connect elsewhere apart)
# Rank 1 dies in init with its host mailbox made: rank 0's init fails, /dev/shm stays empty.
add_test(NAME fault_connect_team COMMAND fault_connect team)
set_tests_properties(fault_connect fault_connect_tcp fault_connect_late fault_connect_late_tcp
  fault_connect_late_apart fault_connect_elsewhere fault_connect_elsewhere_apart
  fault_connect_team PROPERTIES LABELS fault TIMEOUT 120)
set_tests_properties(fault_connect_tcp fault_connect_late_tcp PROPERTIES
  ENVIRONMENT "NCCL_SHM_DISABLE=1")
# Many communicators under a soft limit of 256 open files: Tutti raises the soft limit to the
# hard one as NCCL does ("raise"); with TUTTI_RAISE_NOFILE=0 ("keep") every rank fails at once,
# one naming the limit (tests/fault_fdlimit.c). Over shm and over TCP.
tutti_fault_program(fault_fdlimit)
foreach(mode raise keep)
  add_test(NAME fault_fdlimit_${mode} COMMAND fault_fdlimit ${mode})
  add_test(NAME fault_fdlimit_${mode}_tcp COMMAND fault_fdlimit ${mode})
  set_tests_properties(fault_fdlimit_${mode}_tcp PROPERTIES ENVIRONMENT "NCCL_SHM_DISABLE=1")
  set_tests_properties(fault_fdlimit_${mode} fault_fdlimit_${mode}_tcp PROPERTIES LABELS fault
                       TIMEOUT 120 SKIP_RETURN_CODE 77)
endforeach()
# A rank whose init fails before it reaches the root, its process alive: the others fail at
# once naming it (tests/fault_withdraw.c).
# Rank 1 withdraws over the network; rank 0 inside the root's own process.
tutti_fault_program(fault_withdraw)
add_test(NAME fault_withdraw COMMAND fault_withdraw 1)
add_test(NAME fault_withdraw_rank0 COMMAND fault_withdraw 0)
set_tests_properties(fault_withdraw fault_withdraw_rank0 PROPERTIES LABELS fault TIMEOUT 120)
# Ports held by closed connections in TIME_WAIT: 61 communicators in a namespace with 400
# ephemeral ports (tests/test_ports_timewait.sh; root only, else skipped).
add_test(NAME fault_ports_timewait
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/test_ports_timewait.sh
                 $<TARGET_FILE:fault_fdlimit>)
set_tests_properties(fault_ports_timewait PROPERTIES LABELS fault TIMEOUT 120
                     SKIP_RETURN_CODE 77)
# A survivor that dies during the shrink meant to leave a dead rank behind: the ranks left fail
# within seconds naming it, whether it was to be new rank 0 ("leader") or not ("survivor"), on
# one host and with every rank on its own (tests/fault_shrink.c).
tutti_fault_program(fault_shrink)
foreach(who survivor leader split)
  add_test(NAME fault_shrink_${who} COMMAND fault_shrink ${who})
  add_test(NAME fault_shrink_${who}_apart COMMAND fault_shrink ${who} apart)
  set_tests_properties(fault_shrink_${who} fault_shrink_${who}_apart PROPERTIES LABELS fault
                       TIMEOUT 120)
endforeach()
tutti_fault_program(fault_inject)
add_test(NAME fault_inject COMMAND fault_inject)
set_tests_properties(fault_inject PROPERTIES LABELS fault TIMEOUT 120)
add_test(NAME fault_inject_tree COMMAND fault_inject tree)
set_tests_properties(fault_inject_tree PROPERTIES LABELS fault TIMEOUT 60)

# The libFuzzer harnesses (label fuzz, left out of `make test`; `make fuzz` runs them for
# FUZZ_SECONDS each). Exit 77 without clang's libFuzzer.
add_test(NAME fuzz_parsers
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/fuzz/run.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
                 fuzz_parsers)
set_tests_properties(fuzz_parsers PROPERTIES LABELS fuzz TIMEOUT 1200 SKIP_RETURN_CODE 77)
# Bootstrap messages (root and rank listener checks, wire addresses, ids), the TCP transport's
# receive side (frame headers, descriptors, payloads, end of stream) and the environment (every
# variable of the parameter table, TUTTI_SECRET, the interface choice).
foreach(t fuzz_bootstrap fuzz_tcp fuzz_env)
  add_test(NAME ${t}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/fuzz/run.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
                   ${t})
  set_tests_properties(${t} PROPERTIES LABELS fuzz TIMEOUT 1200 SKIP_RETURN_CODE 77)
endforeach()

# Hostile connections (idle, HTTP, random bytes, huge lengths, 1 byte/s) to every listening port
# of a 2-rank job during init and its AllReduces: every operation succeeds with exact results;
# init times with and without the attack are printed. 100 connections per port by default,
# 1,000 with 1,000 AllReduces under soak, and that 50 times in a row (_repeat: the minimum,
# median and maximum init times are printed); over shared memory and over TCP.
tutti_fault_program(fault_hostile)
foreach(cfg "shm;" "tcp;NCCL_SHM_DISABLE=1")
  list(GET cfg 0 name)
  list(GET cfg 1 extra)
  add_test(NAME fault_hostile_${name} COMMAND fault_hostile --conns 100 --ops 200)
  add_test(NAME fault_hostile_${name}_soak COMMAND fault_hostile --conns 1000 --ops 1000)
  add_test(NAME fault_hostile_${name}_repeat
           COMMAND fault_hostile --conns 1000 --ops 1000 --runs 50)
  set_tests_properties(fault_hostile_${name} PROPERTIES LABELS fault TIMEOUT 120
                       SKIP_RETURN_CODE 77 ENVIRONMENT "${extra}")
  set_tests_properties(fault_hostile_${name}_soak PROPERTIES LABELS soak TIMEOUT 600
                       SKIP_RETURN_CODE 77 ENVIRONMENT "${extra}")
  set_tests_properties(fault_hostile_${name}_repeat PROPERTIES LABELS soak TIMEOUT 1200
                       SKIP_RETURN_CODE 77 ENVIRONMENT "${extra}")
endforeach()

# Carrying on after a death: examples/elastic.c (test example_elastic, over shared memory) again
# over TCP. 3 ranks train, rank 2 is killed, the survivors shrink, train on and grow back to 3
# with a replacement (ncclCommGetUniqueId + ncclCommGrow); every sum and the model are checked
# bit for bit. A few seconds.
add_test(NAME fault_grow_tcp COMMAND $<TARGET_FILE:example_elastic>)
set_tests_properties(fault_grow_tcp PROPERTIES LABELS fault TIMEOUT 150 PROCESSORS 2
                     ENVIRONMENT "NCCL_SHM_DISABLE=1")
