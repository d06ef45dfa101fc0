# Bootstrap and socket-helper tests. The binary is built from the bootstrap's own sources and
# the util helpers it uses, so it does not depend on the rest of the library being complete.
# tutti_bootstrap_program makes each such test alike.
function(tutti_bootstrap_program name)
  add_executable(${name} ${CMAKE_SOURCE_DIR}/tests/${name}.c
    ${CMAKE_SOURCE_DIR}/src/bootstrap/auth.c
    ${CMAKE_SOURCE_DIR}/src/bootstrap/bootstrap.c
    ${CMAKE_SOURCE_DIR}/src/bootstrap/p2p.c
    ${CMAKE_SOURCE_DIR}/src/bootstrap/root.c
    ${CMAKE_SOURCE_DIR}/src/bootstrap/unique_id.c
    ${CMAKE_SOURCE_DIR}/src/bootstrap/listener.c
    ${CMAKE_SOURCE_DIR}/src/bootstrap/gate.c
    ${CMAKE_SOURCE_DIR}/src/util/sock.c
    ${CMAKE_SOURCE_DIR}/src/util/log.c
    ${CMAKE_SOURCE_DIR}/src/util/param.c)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(${name} PRIVATE Threads::Threads PkgConfig::SODIUM)
endfunction()

tutti_bootstrap_program(test_bootstrap)

foreach(n 1 2 3 5 8)
  add_test(NAME bootstrap_ranks_${n} COMMAND test_bootstrap ranks ${n})
endforeach()
foreach(s missing late mismatch commid garbage emfile)
  add_test(NAME bootstrap_${s} COMMAND test_bootstrap ${s})
endforeach()
tutti_bootstrap_program(test_sock)
add_test(NAME bootstrap_sock COMMAND test_sock)
foreach(n 1 2 3 5 8)
  list(APPEND TUTTI_BOOTSTRAP_TESTS bootstrap_ranks_${n})
endforeach()
set_tests_properties(${TUTTI_BOOTSTRAP_TESTS} bootstrap_commid bootstrap_garbage bootstrap_emfile
  PROPERTIES LABELS transport TIMEOUT 120 SKIP_RETURN_CODE 77)
set_tests_properties(bootstrap_missing bootstrap_late bootstrap_mismatch
  PROPERTIES LABELS fault TIMEOUT 120 SKIP_RETURN_CODE 77)
set_tests_properties(bootstrap_sock PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77)

# Attacks on authentication by a stranger against a live job: what listeners send before
# authentication, joins under guessed secrets, recorded hellos replayed (as is and edited) to the
# root and to a rank. 50 attempts of each kind by default, 1,000 under soak.
tutti_bootstrap_program(test_auth)
add_test(NAME bootstrap_auth COMMAND test_auth 50)
set_tests_properties(bootstrap_auth PROPERTIES LABELS fault TIMEOUT 120)
add_test(NAME bootstrap_auth_soak COMMAND test_auth 1000)
set_tests_properties(bootstrap_auth_soak PROPERTIES LABELS soak TIMEOUT 900)

# The gate under a flood: a connection that sent the job's tag survives 1,000 idle connections
# arriving between its challenge and its hello, at the root and at a rank's listener; a
# connection evicted before its tag was read connects again; another job's rank is refused at
# once. About a second; 4,000 connections under soak.
tutti_bootstrap_program(test_bs_flood)
add_test(NAME bootstrap_flood COMMAND test_bs_flood 1000)
set_tests_properties(bootstrap_flood PROPERTIES LABELS fault TIMEOUT 120 SKIP_RETURN_CODE 77)
add_test(NAME bootstrap_flood_soak COMMAND test_bs_flood 4000)
set_tests_properties(bootstrap_flood_soak PROPERTIES LABELS soak TIMEOUT 300
                     SKIP_RETURN_CODE 77)
