# The programs in examples/ (label examples), each built here and run as a user would:
#   example_first          the README's first program, 4 ranks under tutti-run
#   example_host_stream    AllReduces on a host stream overlapping computation, 4 ranks
#   example_multihost      examples/multihost.sh: two tutti-run "hosts" of 2 ranks on loopback
#   example_elastic        3 ranks train; one dies, the survivors shrink, go on, and grow back to 3
#                          with a replacement (its own launcher; rerun over TCP as fault_grow_tcp)
#   example_unique_id_mpi  ncclGetUniqueId + MPI_Bcast + ncclCommInitRank under mpirun (skipped,
#                          exit 77, without Open MPI; tools/install-deps.sh installs it)
foreach(ex first host_stream elastic)
  add_executable(example_${ex} examples/${ex}.c)
  target_link_libraries(example_${ex} PRIVATE tutti)
  target_compile_options(example_${ex} PRIVATE ${TUTTI_WARNINGS})
endforeach()

# Every rank must print its line (and exit 0).
set(TT_EXPECT sh ${CMAKE_SOURCE_DIR}/tests/expect_lines.sh 4 "rank [0-3] of 4: sum of ranks = 6$")
add_test(NAME example_first COMMAND ${TT_EXPECT} $<TARGET_FILE:tutti-run> -n 4 --timeout 60
                                    $<TARGET_FILE:example_first>)
add_test(NAME example_host_stream COMMAND $<TARGET_FILE:tutti-run> -n 4 --timeout 60
                                          $<TARGET_FILE:example_host_stream>)
# The port: one this test alone uses, offset by the shell's pid against a second build tree
# running it at the same time.
add_test(NAME example_multihost
         COMMAND ${TT_EXPECT} sh -c "sh \"$0\" \"$1\" \"$2\" $((29600 + $$ % 400))"
                 ${CMAKE_SOURCE_DIR}/examples/multihost.sh $<TARGET_FILE:tutti-run>
                 $<TARGET_FILE:example_first>)

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_executable(example_unique_id_mpi examples/unique_id_mpi.c)
  target_link_libraries(example_unique_id_mpi PRIVATE tutti MPI::MPI_C)
  # Open MPI refuses root unless told; CI runs as root.
  add_test(NAME example_unique_id_mpi
           COMMAND sh -c "command -v \"$0\" >/dev/null || { echo 'skipped: no mpirun'; exit 77; }
                          root=''; [ \"$(id -u)\" -eq 0 ] && root=--allow-run-as-root
                          exec \"$0\" $root --oversubscribe -n 2 \"$1\""
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:example_unique_id_mpi>)
  # Under ASan, Open MPI's own allocations, never freed, are not ours to report.
  set(TT_MPI_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  if(TUTTI_SANITIZE)
    list(APPEND TT_MPI_ENV "ASAN_OPTIONS=detect_leaks=0")
  endif()
  set_tests_properties(example_unique_id_mpi PROPERTIES ENVIRONMENT "${TT_MPI_ENV}")
else()
  add_test(NAME example_unique_id_mpi
           COMMAND sh -c "echo 'skipped: no MPI C compiler (mpicc) when CMake configured'; exit 77")
endif()
add_test(NAME example_elastic COMMAND $<TARGET_FILE:example_elastic>)
set_tests_properties(example_first example_host_stream example_multihost example_unique_id_mpi
                     example_elastic
                     PROPERTIES LABELS examples TIMEOUT 90 SKIP_RETURN_CODE 77 PROCESSORS 2)
