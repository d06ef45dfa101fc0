# Unit test of algorithm selection: NCCL_ALGO / NCCL_PROTO parsing, the cost model's shape and the
# choices it makes. Linked with the library's objects: selection asks every algorithm of the
# table, whose estimators live in their own files.
add_executable(unit_tune tests/unit_tune.c $<TARGET_OBJECTS:tutti_obj>)
target_include_directories(unit_tune PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(unit_tune PRIVATE ${TUTTI_WARNINGS})
target_link_libraries(unit_tune PRIVATE Threads::Threads rt m ${TUTTI_LIB_DEPS})
add_test(NAME unit_tune COMMAND unit_tune)
set_tests_properties(unit_tune PROPERTIES LABELS unit TIMEOUT 60)

# The ranks agree on the measured cost of a cross-memory copy and choose alike with it
# (tests/test_cma_cost.sh; three 2-rank launches, about a second).
add_test(NAME tune_cma_cost COMMAND sh ${CMAKE_SOURCE_DIR}/tests/test_cma_cost.sh
         ${CMAKE_BINARY_DIR})
set_tests_properties(tune_cma_cost PROPERTIES LABELS coll TIMEOUT 120 SKIP_RETURN_CODE 77)

# The choice a thread remembers for a repeated collective depends on the element size too
# (tests/tune_memo.c: Tree with 15-byte slots stalled on a float64 AllReduce of 56 bytes).
if(TARGET tutti-run)
  add_executable(tune_memo ${CMAKE_SOURCE_DIR}/tests/tune_memo.c)
  target_compile_options(tune_memo PRIVATE ${TUTTI_WARNINGS})
  target_link_libraries(tune_memo PRIVATE tutti)
  add_test(NAME tune_memo COMMAND $<TARGET_FILE:tutti-run> -n 2 --timeout 50
           $<TARGET_FILE:tune_memo>)
  set_tests_properties(tune_memo PROPERTIES LABELS coll TIMEOUT 60 ENVIRONMENT
                       "NCCL_BUFFSIZE=120;NCCL_ALGO=Tree;TUTTI_TIMEOUT_MS=10000")
endif()
